//! Rebuilds the coordinator when the dashboard's build output appears, disappears or
//! changes (rust-embed compiles `ui/dist-dashboard` into the binary; cargo would not
//! notice a folder that was missing at the last build), and says at build time when it
//! is missing: such a coordinator serves a page that explains how to build it instead of
//! the dashboard.

fn main() {
    println!("cargo:rerun-if-changed=../ui/dist-dashboard");
    println!("cargo:rerun-if-changed=../ui/dist-dashboard/dashboard.html");
    let built = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("../ui/dist-dashboard/dashboard.html");
    if !built.exists() {
        println!(
            "cargo:warning=building the coordinator without its dashboard: ui/dist-dashboard is missing. \
             Build it first with `(cd ui && npm install && npm run build)`, then build again."
        );
    }
}
