//! `edgellm inspect <model.gguf> [--json]`: what a GGUF file holds, read from its header only
//! (the tensor data is never read, so this is instant even for multi-GB files).
//!
//! `--estimate [--ctx N] [--kv-dtype f16|q8] [--batch B]`: the memory ledger's estimate of each
//! term (weights, KV, activations, runtime) and the load peak for that session, as the browser
//! build would use them (wasm32 figures).

use std::collections::BTreeMap;

use edgellm::gguf::{read_header_file, Array, GgmlType, GgufHeader, Value};
use edgellm::limits::{MAX_BATCH, MAX_CONTEXT_TOKENS};
use edgellm::memory::{Estimate, EstimateOptions, HeaderStats, KvElem, ModelGeometry};
use serde_json::{json, Map, Value as Json};

use crate::args::{count, kv_dtype};

/// What a GGUF file holds: architecture, hyper-parameters, tensors by type
///
/// Read from the header only. --estimate: the memory ledger's estimate per term (weights, KV,
/// activations, runtime) and the load peak, as the browser build uses them (wasm32 figures).
#[derive(clap::Args, Debug)]
pub struct InspectArgs {
    /// The GGUF model file
    #[arg(value_name = "model.gguf")]
    path: String,
    /// JSON on stdout
    #[arg(long)]
    json: bool,
    /// The memory estimate (wasm32 figures) instead of the file's contents
    #[arg(long)]
    estimate: bool,
    /// --estimate: session context in tokens (default: the training context, at most 4096)
    #[arg(long, value_name = "N", requires = "estimate")]
    ctx: Option<u64>,
    /// --estimate: KV storage, f16 or q8 (int8)
    #[arg(long, value_name = "f16|q8", value_parser = kv_dtype, requires = "estimate")]
    kv_dtype: Option<KvElem>,
    /// --estimate: prefill batch
    #[arg(long, value_name = "B", requires = "estimate")]
    batch: Option<u64>,
}

/// Arrays longer than this are summarised rather than printed (per-layer hyper-parameter
/// arrays are short; anything longer is not a hyper-parameter a person wants to read).
const MAX_ARRAY_SHOWN: usize = 64;

pub fn run(args: InspectArgs) -> Result<(), String> {
    let path = &args.path;
    let (header, file_bytes) =
        read_header_file(path).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    if args.estimate {
        return estimate(&args, &header);
    }
    let report = Report::new(&header, file_bytes);
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text(path));
    }
    Ok(())
}

/// `--estimate`: the ledger's figures for a session of `--ctx` tokens (default: the model's
/// training context, at most 4096, as a session without KV options).
fn estimate(args: &InspectArgs, header: &GgufHeader) -> Result<(), String> {
    let g = ModelGeometry::from_header(header).map_err(|e| format!("{e} [{}]", e.code()))?;
    let ctx = count("ctx", args.ctx, 1, MAX_CONTEXT_TOKENS)?.unwrap_or(if g.hparams.n_ctx_train == 0 { 4096 } else { g.hparams.n_ctx_train.min(4096) });
    let dtype = args.kv_dtype.unwrap_or(KvElem::F16);
    let d = EstimateOptions::default();
    let batch = count("batch", args.batch, 1, MAX_BATCH)?.unwrap_or(d.batch);
    let o = EstimateOptions { kv_tokens: ctx, kv_dtype: dtype, batch, ..d };
    let e = Estimate::new(&g, &HeaderStats::of(header, header.data_offset), &o);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&e).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let row = |name: &str, b: u64, note: String| format!("  {name:<12} {:>16} {:>10}  {note}\n", grouped(b), mib(b));
    let mut s = format!(
        "memory estimate (wasm32): ctx {ctx} tokens, KV {}, prefill batch {batch}\n  {:<12} {:>16} {:>10}\n",
        dtype.name(),
        "term",
        "bytes",
        "MiB"
    );
    let a = &e.activation_parts;
    let r = &e.runtime_parts;
    s += &row("weights", e.weights, "tensor bytes as stored".into());
    s += &row("kv", e.kv, format!("{} B/token while no layer is full", grouped(e.kv_bytes_per_token)));
    s += &row("activations", e.activations, format!("forward {}, logits {}, sampler {}, KV staging {}", mib(a.forward), mib(a.logits), mib(a.sampler), mib(a.kv_staging)));
    s += &row(
        "runtime",
        e.runtime,
        format!("module {}, header {}, tokenizer {}, fragmentation {}", mib(r.module), mib(r.header), mib(r.tokenizer), mib(r.fragmentation)),
    );
    s += &row("total", e.total, "weights + kv + activations + runtime".into());
    s += &row("load peak", e.load_peak, "wasm memory at the end of the load".into());
    print!("{s}");
    Ok(())
}

struct Report<'a> {
    header: &'a GgufHeader,
    file_bytes: u64,
    architecture: Option<&'a str>,
    /// `<arch>.*` keys with the prefix removed, in file order.
    hparams: Vec<(&'a str, &'a Value)>,
    tokenizer_model: Option<&'a str>,
    vocab_size: Option<usize>,
    /// Per tensor type: (count, bytes), in type-id order.
    by_type: BTreeMap<GgmlType, (u64, u64)>,
}

impl<'a> Report<'a> {
    fn new(header: &'a GgufHeader, file_bytes: u64) -> Report<'a> {
        let architecture = header.architecture();
        let hparams = match architecture {
            Some(arch) => header
                .metadata
                .iter()
                .filter_map(|(k, v)| {
                    let rest = k.strip_prefix(arch)?.strip_prefix('.')?;
                    Some((rest, v))
                })
                .collect(),
            None => Vec::new(),
        };
        let mut by_type = BTreeMap::new();
        for t in &header.tensors {
            let e = by_type.entry(t.ggml_type).or_insert((0, 0));
            e.0 += 1;
            e.1 += t.n_bytes();
        }
        Report {
            header,
            file_bytes,
            architecture,
            hparams,
            tokenizer_model: header.get_str("tokenizer.ggml.model"),
            vocab_size: header.get_array("tokenizer.ggml.tokens").map(Array::len),
            by_type,
        }
    }

    fn to_json(&self) -> Json {
        let h = self.header;
        let hparams: Map<String, Json> =
            self.hparams.iter().map(|(k, v)| (k.to_string(), value_json(v))).collect();
        let by_type: Map<String, Json> = self
            .by_type
            .iter()
            .map(|(t, (count, bytes))| {
                (t.name().to_string(), json!({"count": count, "bytes": bytes}))
            })
            .collect();
        json!({
            "architecture": self.architecture,
            "name": h.get_str("general.name"),
            "file_bytes": self.file_bytes,
            "version": h.version,
            "alignment": h.alignment,
            "data_offset": h.data_offset,
            "metadata_count": h.metadata.len(),
            "hparams": hparams,
            "tokenizer": {"model": self.tokenizer_model, "vocab_size": self.vocab_size},
            "tensor_count": h.tensors.len(),
            "by_type": by_type,
            "weight_bytes": h.tensor_data_bytes(),
        })
    }

    fn to_text(&self, path: &str) -> String {
        use std::fmt::Write;
        let h = self.header;
        let mut s = String::new();
        let or_none = |v: Option<&str>| v.unwrap_or("(none)").to_string();
        let _ = writeln!(s, "file           {path}");
        let _ = writeln!(s, "file size      {} ({})", bytes(self.file_bytes), mib(self.file_bytes));
        let _ = writeln!(s, "GGUF version   {}", h.version);
        let _ = writeln!(s, "architecture   {}", or_none(self.architecture));
        let _ = writeln!(s, "name           {}", or_none(h.get_str("general.name")));
        let _ = writeln!(
            s,
            "metadata       {} keys, header {}",
            h.metadata.len(),
            bytes(h.data_offset)
        );
        if !self.hparams.is_empty() {
            let _ = writeln!(s, "hyper-parameters");
            let width = self.hparams.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in &self.hparams {
                let _ = writeln!(s, "  {k:<width$}  {}", value_text(v));
            }
        }
        let vocab = match self.vocab_size {
            Some(n) => format!("{n} tokens"),
            None => "no vocabulary".into(),
        };
        let _ = writeln!(s, "tokenizer      {}, {vocab}", or_none(self.tokenizer_model));
        let _ = writeln!(s, "tensors        {}", h.tensors.len());
        let _ = writeln!(s, "  {:<8} {:>6} {:>16}", "type", "count", "bytes");
        for (t, (count, n)) in &self.by_type {
            let _ = writeln!(s, "  {:<8} {count:>6} {:>16}", t.name(), grouped(*n));
        }
        let w = h.tensor_data_bytes();
        let _ = writeln!(s, "weights        {} ({})", bytes(w), mib(w));
        s
    }
}

/// f32 metadata printed by its shortest decimal form (1e-6, not 9.99999997e-7).
fn f32_json(v: f32) -> Json {
    format!("{v}")
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Json::Null, Json::Number)
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::F32(x) => f32_json(*x),
        Value::F64(x) => serde_json::Number::from_f64(*x).map_or(Json::Null, Json::Number),
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Array(a) => array_json(a),
        other => match (other.as_u64(), other.as_i64()) {
            (Some(u), _) => json!(u),
            (None, Some(i)) => json!(i),
            _ => Json::Null,
        },
    }
}

fn array_json(a: &Array) -> Json {
    if a.len() > MAX_ARRAY_SHOWN {
        return json!({"type": format!("{:?}", a.value_type()), "len": a.len()});
    }
    let items: Vec<Json> = match a {
        Array::U8(v) => v.iter().map(|x| json!(x)).collect(),
        Array::I8(v) => v.iter().map(|x| json!(x)).collect(),
        Array::U16(v) => v.iter().map(|x| json!(x)).collect(),
        Array::I16(v) => v.iter().map(|x| json!(x)).collect(),
        Array::U32(v) => v.iter().map(|x| json!(x)).collect(),
        Array::I32(v) => v.iter().map(|x| json!(x)).collect(),
        Array::U64(v) => v.iter().map(|x| json!(x)).collect(),
        Array::I64(v) => v.iter().map(|x| json!(x)).collect(),
        Array::F32(v) => v.iter().map(|x| f32_json(*x)).collect(),
        Array::F64(v) => v.iter().map(|x| json!(x)).collect(),
        Array::Bool(v) => v.iter().map(|x| json!(x)).collect(),
        Array::String(v) => v.iter().map(|x| json!(x)).collect(),
        Array::Array(v) => v.iter().map(array_json).collect(),
    };
    Json::Array(items)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) if a.len() > MAX_ARRAY_SHOWN => {
            format!("[{} × {:?}]", a.len(), a.value_type())
        }
        Value::F32(x) => format!("{x}"),
        Value::F64(x) => format!("{x}"),
        other => value_json(other).to_string(),
    }
}

/// 253113024 → "253,113,024 bytes"
fn bytes(n: u64) -> String {
    grouped(n) + " bytes"
}

/// 253113024 → "253,113,024"
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
}
