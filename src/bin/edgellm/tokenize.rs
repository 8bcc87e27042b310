//! `edgellm tokenize --model M --text T [--special] [--no-bos] [--json]`
//! `edgellm detokenize --model M --ids 2,818,5279 [--special] [--json]`
//!
//! Only the GGUF header is read. `--text -` reads the text from standard input.

use std::io::Read;

use edgellm::tokenizer::{DecodeOptions, Tokenizer};

use crate::args::Args;

fn load(args: &Args) -> Result<Tokenizer, String> {
    let path = args.required("model")?;
    let (header, _) = edgellm::gguf::read_header_file(path).map_err(|e| format!("{path}: {e}"))?;
    Tokenizer::from_gguf(&header).map_err(|e| format!("{path}: {e} [{}]", e.code()))
}

/// Prints the token ids of `--text`: comma-separated (ready for `detokenize --ids`), or
/// `{"ids":[...]}` with `--json`. BOS/EOS are added as the model's metadata asks unless
/// `--no-bos`; `--special` parses special-token text such as `<start_of_turn>`.
pub fn run_tokenize(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, &["model", "text"], &["special", "no-bos", "json"])?;
    let mut text = args.required("text")?.to_string();
    if text == "-" {
        text.clear();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading stdin: {e}"))?;
    }
    let tok = load(&args)?;
    let ids = tok.encode(&text, !args.flag("no-bos"), args.flag("special"));
    if args.flag("json") {
        println!("{}", serde_json::json!({ "ids": ids }));
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", list.join(","));
    }
    Ok(())
}

/// Prints the text of `--ids` as llama.cpp's detokenizer gives it; `--special` renders
/// control tokens (e.g. `<bos>`) as their text. `--json` prints `{"text": ...}`.
pub fn run_detokenize(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(argv, &["model", "ids"], &["special", "json"])?;
    let ids = args.ids("ids")?.ok_or("--ids is required")?;
    let tok = load(&args)?;
    let opts = DecodeOptions {
        remove_special: false,
        unparse_special: args.flag("special"),
    };
    let text = tok
        .decode(&ids, opts)
        .map_err(|e| format!("{e} [{}]", e.code()))?;
    if args.flag("json") {
        println!("{}", serde_json::json!({ "text": text }));
    } else {
        println!("{text}");
    }
    Ok(())
}
