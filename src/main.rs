//! The `jev` binary: parse arguments, dispatch to a subcommand, map the outcome to an exit
//! code. All work happens in the `jev` library and the `cli` modules.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
