//! Rebuilds the coordinator when the dashboard's build output appears, disappears or
//! changes (rust-embed compiles `ui/dist-dashboard` into the binary; cargo would not
//! notice a folder that was missing at the last build).

fn main() {
    println!("cargo:rerun-if-changed=../ui/dist-dashboard");
    println!("cargo:rerun-if-changed=../ui/dist-dashboard/dashboard.html");
}
