//! The native command-line tool: one file per subcommand.
mod args;
mod inspect;
mod tokenize;

const USAGE: &str = "usage: edgellm <command> [options]

commands:
  inspect <model.gguf> [--json]       architecture, hyper-parameters, tensors by type
  tokenize --model M --text T [--special] [--no-bos] [--json]
                                      token ids (BOS per metadata; --text - reads stdin)
  detokenize --model M --ids 2,818,5279 [--special] [--json]
                                      text of token ids
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
        "tokenize" => tokenize::run_tokenize(rest),
        "detokenize" => tokenize::run_detokenize(rest),
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
