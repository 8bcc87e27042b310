//! `edgellm tokenize --model M --text T [--special] [--no-bos] [--json]`
//! `edgellm detokenize --model M --ids 2,818,5279 [--special] [--json]`
//!
//! Only the GGUF header is read. `--text -` reads the text from standard input.

use std::io::Read;

use edgellm::tokenizer::{DecodeOptions, Tokenizer};

use crate::args::TokenIds;

/// Token ids of a text (BOS per metadata)
#[derive(clap::Args, Debug)]
pub struct TokenizeArgs {
    /// The GGUF model file (only its header is read)
    #[arg(long, value_name = "M")]
    model: String,
    /// The text; `-` reads it from standard input
    #[arg(long, value_name = "T")]
    text: String,
    /// Parse special-token text such as <start_of_turn>
    #[arg(long)]
    special: bool,
    /// No BOS/EOS, whatever the metadata asks
    #[arg(long)]
    no_bos: bool,
    /// {"ids": [...]} on stdout
    #[arg(long)]
    json: bool,
}

/// Text of token ids
#[derive(clap::Args, Debug)]
pub struct DetokenizeArgs {
    /// The GGUF model file (only its header is read)
    #[arg(long, value_name = "M")]
    model: String,
    /// The token ids
    #[arg(long, value_name = "2,818,...")]
    ids: TokenIds,
    /// Render control tokens (e.g. <bos>) as their text
    #[arg(long)]
    special: bool,
    /// {"text": ...} on stdout
    #[arg(long)]
    json: bool,
}

fn load(path: &str) -> Result<Tokenizer, String> {
    let (header, _) = edgellm::gguf::read_header_file(path).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    Tokenizer::from_gguf(&header).map_err(|e| format!("{path}: {e} [{}]", e.code()))
}

/// Prints the token ids of `--text`: comma-separated (ready for `detokenize --ids`), or
/// `{"ids":[...]}` with `--json`. BOS/EOS are added as the model's metadata asks unless
/// `--no-bos`; `--special` parses special-token text such as `<start_of_turn>`.
pub fn run_tokenize(args: TokenizeArgs) -> Result<(), String> {
    let mut text = args.text;
    if text == "-" {
        text.clear();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("reading stdin: {e}"))?;
    }
    let tok = load(&args.model)?;
    let ids = tok.encode(&text, !args.no_bos, args.special);
    if args.json {
        println!("{}", serde_json::json!({ "ids": ids }));
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!("{}", list.join(","));
    }
    Ok(())
}

/// Prints the text of `--ids` as llama.cpp's detokenizer gives it; `--special` renders
/// control tokens (e.g. `<bos>`) as their text. `--json` prints `{"text": ...}`.
pub fn run_detokenize(args: DetokenizeArgs) -> Result<(), String> {
    let TokenIds(ids) = args.ids;
    let tok = load(&args.model)?;
    let opts = DecodeOptions {
        remove_special: false,
        unparse_special: args.special,
    };
    let text = tok
        .decode(&ids, opts)
        .map_err(|e| format!("{e} [{}]", e.code()))?;
    if args.json {
        println!("{}", serde_json::json!({ "text": text }));
    } else {
        println!("{text}");
    }
    Ok(())
}
