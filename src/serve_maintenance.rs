//! `gitstow serve`'s flags of automatic maintenance (`--no-maintenance`,
//! `--maintenance-grace`, the scan interval and the GC rules) and the
//! [`gitstow_service::maintenance::MaintenanceConfig`] they give.

/// The maintenance flags of `gitstow serve` (flattened into its arguments).
#[derive(Debug, clap::Args)]
pub struct MaintenanceArgs {
    /// Turn automatic maintenance off (by default each push that commits queues
    /// its repository for geometric compaction and the deletion of containers
    /// past their grace period).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub no_maintenance: bool,
    /// Seconds a container stays in the store after no state names it any
    /// more (a fetch on an older state reads it that long; a push has that
    /// long from its first upload to its commit).
    #[arg(long, default_value_t = 86_400)]
    pub maintenance_grace: u64,
    /// Seconds between scans of a repository's containers for orphans (left
    /// by failed or killed pushes); a scan lists the repository's containers.
    #[arg(long, default_value_t = 86_400)]
    pub maintenance_scan_interval: u64,
    /// Seconds between garbage collections of a repository by automatic
    /// maintenance (0: never; run `gitstow maintain --gc` instead).
    #[arg(long, default_value_t = 7 * 86_400)]
    pub gc_interval: u64,
    /// A GC also runs when this many objects lie outside the repository's
    /// closure (pushed since its last GC or import: what a clone walks),
    /// and they are at least `--gc-outside-percent` of the closure's (0:
    /// the clock only).
    #[arg(long, default_value_t = 10_000)]
    pub gc_outside_objects: u64,
    /// The share of the closure's objects (in percent) the objects outside
    /// it must reach for a GC by work.
    #[arg(long, default_value_t = 10)]
    pub gc_outside_percent: u64,
    /// Seconds from one GC of a repository to the next one due by work
    /// (the clock starts at the repository's first maintenance pass).
    #[arg(long, default_value_t = 3600)]
    pub gc_min_interval: u64,
}

impl MaintenanceArgs {
    /// The settings of automatic maintenance these flags give (merged
    /// containers staged in the system's temp directory until
    /// [`crate::serve_settings::Settings::use_scratch`] names the server's
    /// scratch directory).
    pub fn config(&self) -> gitstow_service::maintenance::MaintenanceConfig {
        let grace = std::time::Duration::from_secs(self.maintenance_grace);
        let options = gitstow_maintain::Options {
            grace,
            scan_interval: std::time::Duration::from_secs(self.maintenance_scan_interval),
            gc_interval: (self.gc_interval > 0)
                .then(|| std::time::Duration::from_secs(self.gc_interval)),
            gc_work: (self.gc_outside_objects > 0).then(|| gitstow_maintain::policy::GcWork {
                min_objects: self.gc_outside_objects,
                percent: self.gc_outside_percent,
                min_interval: std::time::Duration::from_secs(self.gc_min_interval),
            }),
            // Tests only: widen the window between a merge's read of the state and its commit.
            test_commit_delay: std::env::var("GITSTOW_TEST_MAINTENANCE_COMMIT_DELAY_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .map(std::time::Duration::from_millis),
            ..Default::default()
        };
        gitstow_service::maintenance::MaintenanceConfig {
            options,
            revisit: (grace / 2).clamp(
                std::time::Duration::from_secs(1),
                std::time::Duration::from_secs(3600),
            ),
        }
    }
}
