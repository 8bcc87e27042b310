//! The native command-line tool: one file per subcommand.
mod args;
mod inspect;
mod generate;
mod logits;
mod perplexity;
mod serve;
mod threads;
mod tokenize;

const USAGE: &str = "usage: edgellm <command> [options]

commands:
  inspect <model.gguf> [--json]       architecture, hyper-parameters, tensors by type
  inspect <model.gguf> --estimate [--ctx N] [--kv-dtype f16|q8] [--batch B] [--json]
                                      memory estimate per term (weights, KV, activations,
                                      runtime) and load peak, as the browser build uses them
  generate --model M (--prompt TEXT | --ids 2,818) [--max-tokens N] [--temperature T]
           [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--stop STR]
           [--chat] [--ignore-eos] [--json] [--trace N] [--threads N] [KV]
                                      generate text (streams; metrics on stderr)
  perplexity --model M --file F [--max-tokens N] [--chunk C] [--tail-from N] [--json] [--threads N] [KV]
                                      teacher-forced perplexity of a text file
  logits --model M --ids 2,818 [--all-positions] [--top K] [--json] [--threads N]
                                      teacher-forced next-token logits (one batched pass)
  tokenize --model M --text T [--special] [--no-bos] [--json]
                                      token ids (BOS per metadata; --text - reads stdin)
  detokenize --model M --ids 2,818,5279 [--special] [--json]
                                      text of token ids
  serve --model M [--port 8080] [--host 127.0.0.1] [--api-key K] [--cors-origin O]...
        [--queue 16] [--max-tokens 1024] [--max-prompt-tokens N] [--max-body-bytes B]
        [--max-connections 256] [--model-id NAME] [--allowed-host NAME,...]
        [--body-timeout-ms 30000] [--send-timeout-ms 30000] [--max-prefill-ms 120000]
        [--watts-per-busy-core 1.33] [--threads N]
                                      OpenAI-compatible HTTP server (/v1/chat/completions,
                                      /v1/completions, /v1/models, /health)

KV cache options [KV] (without them: a plain context, no eviction):
  --kv-tokens N | --kv-bytes B        budget (tokens held by global-attention layers, or bytes)
  --kv-dtype f16|q8                   storage (q8: int8 with an f16 scale per 32 values)
  --kv-policy window-sinks|error      evict old tokens keeping sinks + recent (default), or refuse
  --kv-sinks K                        attention sinks kept by window-sinks (default 4)

--threads N: threads the model runs on (default: every core); any N gives the same output.
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
        "perplexity" => perplexity::run(rest),
        "serve" => serve::run(rest),
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
