fn main() {
    std::process::exit(gitstow_server::cli::main())
}
