//! A request's sampler settings: `GenerateRequest`'s OpenAI-style fields mapped onto the
//! engine's `SamplerConfig`.

use crate::sampling::SamplerConfig;

use super::GenerateRequest;

impl GenerateRequest {
    /// The sampler settings: greedy when `temperature` is 0, llama.cpp's defaults otherwise,
    /// with every given field applied on top (penalties apply to greedy too).
    pub fn sampler(&self) -> SamplerConfig {
        let greedy = self.temperature.is_some_and(|t| t <= 0.0);
        let mut c = if greedy { SamplerConfig::greedy() } else { SamplerConfig::default() };
        if let Some(t) = self.temperature {
            c.temperature = t;
        }
        if !greedy {
            if let Some(v) = self.top_p {
                c.top_p = v;
            }
            if let Some(v) = self.top_k {
                c.top_k = v;
            }
            if let Some(v) = self.min_p {
                c.min_p = v;
            }
        }
        if let Some(v) = self.repetition_penalty {
            c.repeat_penalty = v;
        }
        if let Some(v) = self.presence_penalty {
            c.presence_penalty = v;
        }
        if let Some(v) = self.frequency_penalty {
            c.frequency_penalty = v;
        }
        if let Some(v) = self.seed {
            c.seed = v;
        }
        if let Some(b) = &self.logit_bias {
            c = c.with_logit_bias(b.iter().map(|(&id, &bias)| (id, bias)));
        }
        c
    }
}
