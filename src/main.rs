#[global_allocator]
static ALLOC: gitstow_server::alloc::CountingJemalloc = gitstow_server::alloc::CountingJemalloc;

/// jemalloc reads its options from this symbol at start-up (see
/// `gitstow_server::alloc::MALLOC_CONF`).
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = gitstow_server::alloc::MALLOC_CONF;

fn main() {
    std::process::exit(gitstow_server::cli::main())
}
