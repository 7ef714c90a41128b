//! The `jev` binary: parse arguments, dispatch to a subcommand, map the outcome to an exit
//! code. All work happens in the `jev` library and the `cli` modules.

mod cli;

// Verification and replay allocate many small values per receipt; mimalloc roughly halves
// the time the system allocator spends on them (see BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
