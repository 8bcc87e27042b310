//! The native command-line tool: one file per subcommand.
mod args;
mod inspect;
mod generate;
mod logits;

const USAGE: &str = "usage: edgellm <command> [options]

commands:
  inspect <model.gguf> [--json]       architecture, hyper-parameters, tensors by type
  generate --model M (--prompt TEXT | --ids 2,818) [--max-tokens N] [--temperature T]
           [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--stop STR]
           [--chat] [--json]        generate text (streams; metrics on stderr)
  logits --model M --ids 2,818 [--all-positions] [--top K] [--json]
                                      teacher-forced next-token logits (one batched pass)
";

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprint!("{USAGE}");
        std::process::exit(2);
    };
    let rest = &argv[1..];
    let result = match cmd.as_str() {
        "inspect" => inspect::run(rest),
        "logits" => logits::run(rest),
        "generate" => generate::run(rest),
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    };
    if let Err(e) = result {
        eprintln!("edgellm {cmd}: {e}");
        std::process::exit(1);
    }
}
