//! The `lull` command: the headless agent and the owner's and coordinator's commands.

fn main() -> anyhow::Result<()> {
    println!("lull {}", env!("CARGO_PKG_VERSION"));
    Ok(())
}
