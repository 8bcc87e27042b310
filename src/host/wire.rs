//! The host's wire types: what the JS worker sends (`GenerateRequest`) and what each host
//! call hands back (`LoadStatus`, `ModelInfo`, `GenerateStarted`, `GenerateResult`), as the
//! JSON the wasm surface passes across. Plain data; `Host` (host.rs) fills them.

use serde::{Deserialize, Serialize};

use crate::kv::KvStats;
use crate::metrics::HeadReport;
use crate::tokenizer::ChatMessage;
use crate::work::WorkReport;

/// What the loader reports after a chunk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadStatus {
    /// "header" (still reading it), "data" (tensor bytes arriving) or "complete".
    pub phase: &'static str,
    pub bytes_received: u64,
    /// True on the one push that completed (and accepted) the header.
    pub header_ready: bool,
}

/// A summary of the loaded model, for the client (`engine.model`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelInfo {
    pub name: String,
    pub architecture: String,
    pub file_size: u64,
    /// Lowercase hex SHA-256 of the whole file as streamed.
    pub sha256: String,
    pub tensor_count: usize,
    pub n_params: u64,
    pub context_length: Option<u64>,
    pub vocab_size: Option<usize>,
    /// The tensor type holding most of the weight bytes (e.g. "Q4_K").
    pub quantization: Option<String>,
    pub has_chat_template: bool,
    /// Bytes of weights held in memory.
    pub weights_bytes: u64,
    /// Positions the session's KV cache holds (prompt + generated tokens); with a KV budget,
    /// the budget in tokens (with `window-sinks` older tokens are evicted beyond it).
    pub max_context: usize,
    /// The session's KV cache: settings, budget and per-token cost by layer kind (empty).
    pub kv: KvStats,
}

/// A generation request (the worker's `GenerateRequest`: OpenAI's parameters once checked by
/// `crate::protocol`).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct GenerateRequest {
    /// "chat" (apply the chat template to `messages`) or "completion" (raw `prompt`).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub messages: Option<Vec<ChatMessage>>,
    #[serde(default)]
    pub prompt: Option<String>,
    /// Default: until the context is full; cut to the room the prompt leaves either way.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// 0 = greedy. Unset sampling fields take llama.cpp's defaults (`SamplerConfig::default`).
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub top_k: Option<usize>,
    #[serde(default)]
    pub min_p: Option<f32>,
    #[serde(default)]
    pub repetition_penalty: Option<f32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// Sent back to JS as an i64 (two's complement, `seed_as_i64`): a negative seed the
    /// client gave stays a number JSON.parse reads exactly, where its u64 form (past 2^53)
    /// came back rounded and was refused.
    #[serde(default, with = "seed_as_i64")]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stop: Option<Vec<String>>,
    /// OpenAI's `logit_bias`: token id → bias in [-100, 100], added to that token's logit
    /// before sampling (ids are checked against the loaded vocabulary by the host).
    #[serde(default)]
    pub logit_bias: Option<std::collections::BTreeMap<u32, f32>>,
    /// Parse special-token text inside user and tool contents too (default: literal text, so a
    /// user cannot forge turns; `tokenizer::ContentSpecials`).
    #[serde(default)]
    pub raw_special_tokens: Option<bool>,
    /// Log probabilities of the generated tokens, with this many alternatives each (at most
    /// 20; `None`: none computed). See `generate/logprobs.rs`.
    #[serde(default)]
    pub logprobs: Option<usize>,
    /// Structured output: the text must be JSON of this form (constrained decoding,
    /// `crate::structured`).
    #[serde(default)]
    pub response_format: Option<crate::structured::OutputFormat>,
    /// Functions the model may call, and the choice (`crate::tools`).
    #[serde(default)]
    pub tools: Option<crate::tools::Tools>,
    /// OpenAI's `n`: this many choices (default 1), generated one after the other from the
    /// same prompt; choice `i` samples with [`GenerateRequest::choice_seed`].
    #[serde(default)]
    pub n: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenerateStarted {
    pub prompt_tokens: usize,
    /// Prompt tokens the KV cache already held from the previous request (not prefilled).
    pub cached_tokens: usize,
    pub max_tokens: usize,
}

/// The summary of a finished generation (usage figures included).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GenerateResult {
    pub text: String,
    pub finish_reason: &'static str,
    pub prompt_tokens: usize,
    /// Prompt tokens reused from the KV cache (OpenAI's `prompt_tokens_details.cached_tokens`).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
    pub ttft_ms: f64,
    pub tpot_ms: f64,
    pub prefill_tokens_per_s: f64,
    pub decode_tokens_per_s: f64,
    /// Weight bytes one decode step reads: the mean over the decode steps (less than the
    /// model's `decode_weight_bytes` when they used the screened head).
    pub decode_weight_bytes_per_token: u64,
    /// K/V bytes the last decode step's attention read (0 without a decode step).
    pub decode_kv_bytes_last_token: u64,
    /// Mean bytes read per decode step: weights + mean K/V over the decode steps.
    pub decode_bytes_per_token: f64,
    /// Achieved decode bandwidth: `decode_bytes_per_token × decode_tokens_per_s / 1e9`.
    pub decode_gb_s: f64,
    /// Which output head the decode steps used (screened / full) and the candidate counts.
    pub head: HeadReport,
    pub total_ms: f64,
    /// Generated ids (including a final end-of-generation token if that is what stopped it).
    pub ids: Vec<u32>,
    /// The KV cache at the end: tokens held, evicted, bytes used / budget, by layer kind.
    pub kv: KvStats,
    /// CPU time per phase and the energy estimate (`crate::work`).
    pub compute: WorkReport,
    /// With `GenerateRequest::logprobs`: one entry per generated token (an end-of-generation
    /// token excluded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<crate::generate::TokenLogprob>>,
    /// With `GenerateRequest::tools`: the calls the model made (OpenAI's shape); `text` is then
    /// the content besides them (empty when the answer is only calls) and `finish_reason`
    /// "tool_calls".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<crate::tools::ToolCall>>,
    /// With `n > 1`: every choice (the first is also the fields above); `completion_tokens`
    /// and the decode figures then cover all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<super::ChoiceResult>>,
}

/// A seed on the wire: written as an i64 (the same 64 bits), read from either form.
mod seed_as_i64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_i64(*v as i64),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            U(u64),
            I(i64),
            /// What JS prints for -2^63 (i64::MIN, whose f64 is exact): "-9223372036854776000",
            /// past i64 as decimal text, so JSON reads it as a float.
            F(f64),
        }
        // The seed comes back from a JS number, printed with the fewest digits that read back
        // to it ("4611687117939016000" for 4611687117939015680): past 2^53 the value is the f64
        // those digits name, as JS held it.
        const EXACT: u64 = 1 << 53;
        let from_f64 = |v: f64| if v < 0.0 { v as i64 as u64 } else { v as u64 };
        Option::<Either>::deserialize(d)?
            .map(|e| match e {
                Either::U(v) if v > EXACT => Ok(from_f64(v as f64)),
                Either::U(v) => Ok(v),
                Either::I(v) if v.unsigned_abs() > EXACT => Ok(from_f64(v as f64)),
                Either::I(v) => Ok(v as u64),
                Either::F(v) if v.fract() == 0.0 && (-9.223_372_036_854_775_808e18..1.844_674_407_370_955_2e19).contains(&v) => Ok(from_f64(v)),
                Either::F(v) => Err(serde::de::Error::custom(format!("seed must be a 64-bit integer, got {v}"))),
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::GenerateRequest;

    /// An integral f64 as JS's `JSON.stringify` writes it: the shortest digits that read back
    /// to it, then zeros (2^63 is "9223372036854775808", -2^63 "-9223372036854776000").
    fn js_number(x: f64) -> String {
        let exact = format!("{x:.0}");
        let digits = format!("{x:e}");
        let (mantissa, exp) = digits.split_once('e').unwrap();
        let exp: usize = exp.parse().unwrap();
        let sign = if x < 0.0 { "-" } else { "" };
        let m: String = mantissa.trim_start_matches('-').chars().filter(|c| *c != '.').collect();
        if m.len() > exp + 1 {
            return exact;
        }
        format!("{sign}{m}{}", "0".repeat(exp + 1 - m.len()))
    }

    /// A negative seed survives the worker's JSON round trip (JS numbers are f64).
    #[test]
    fn seeds_round_trip_through_js_numbers() {
        assert_eq!(js_number(-9_223_372_036_854_775_808.0), "-9223372036854776000");
        // Seeds whose i64 form a JS number holds exactly (others were rounded by the client).
        for seed in [0u64, 7, u64::MAX, u64::MAX - 999, 1 << 63, (1 << 62) + (1 << 40)] {
            let r = GenerateRequest { seed: Some(seed), ..Default::default() };
            let text = serde_json::to_string(&r).unwrap();
            // What JSON.parse + JSON.stringify give back: the number through an f64.
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let as_f64 = v["seed"].as_f64().unwrap();
            let back = text.replace(&format!("\"seed\":{}", v["seed"]), &format!("\"seed\":{}", js_number(as_f64)));
            let r2: GenerateRequest = serde_json::from_str(&back).unwrap();
            assert_eq!(r2.seed, Some(seed), "{text}");
        }
        // u64::MAX as JS prints 2^64 - 1 (it holds 2^64): the last u64.
        let r: GenerateRequest = serde_json::from_str(r#"{"seed": 18446744073709551615}"#).unwrap();
        assert_eq!(r.seed, Some(u64::MAX));
        let r: GenerateRequest = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(r.seed, None);
    }
}
