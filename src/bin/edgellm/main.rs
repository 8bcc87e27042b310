//! The native command-line tool: one file per subcommand, each with its clap arguments
//! (`edgellm <command> --help`); `args.rs` and `threads.rs` hold what several share.
mod args;
mod generate;
mod inspect;
mod logits;
mod perplexity;
mod serve;
mod threads;
mod tokenize;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "edgellm", version, about = "Private inference of quantized LLMs (GGUF): the native CLI and OpenAI-compatible server of the edgellm engine", arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Inspect(inspect::InspectArgs),
    Generate(generate::GenerateArgs),
    Perplexity(perplexity::PerplexityArgs),
    Logits(logits::LogitsArgs),
    Tokenize(tokenize::TokenizeArgs),
    Detokenize(tokenize::DetokenizeArgs),
    Serve(serve::ServeArgs),
}

fn main() {
    // Usage errors (unknown option, missing or bad value) are clap's: a message naming the
    // option, exit 2; `--help` exits 0. Errors of the run itself exit 1.
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_)) {
        stop_quietly_on_a_closed_pipe();
    }
    let (name, result) = match cli.command {
        Command::Inspect(a) => ("inspect", inspect::run(a)),
        Command::Generate(a) => ("generate", generate::run(a)),
        Command::Perplexity(a) => ("perplexity", perplexity::run(a)),
        Command::Logits(a) => ("logits", logits::run(a)),
        Command::Tokenize(a) => ("tokenize", tokenize::run_tokenize(a)),
        Command::Detokenize(a) => ("detokenize", tokenize::run_detokenize(a)),
        Command::Serve(a) => ("serve", serve::run(a)),
    };
    if let Err(e) = result {
        eprintln!("edgellm {name}: {e}");
        std::process::exit(1);
    }
}

/// `edgellm logits … | head`: once the reader has gone, the output commands end as other Unix
/// tools do (killed by SIGPIPE, no message) instead of panicking in `println!` (Rust ignores
/// SIGPIPE, so a write to a closed pipe is an error that `println!` turns into a panic). Not for
/// `serve`, whose client sockets must get the error, not the signal.
fn stop_quietly_on_a_closed_pipe() {
    // SAFETY: restores the default disposition of one signal before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

