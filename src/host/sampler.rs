//! A request's sampler settings: `GenerateRequest`'s OpenAI-style fields mapped onto the
//! engine's `SamplerConfig`.

use crate::sampling::SamplerConfig;

use super::GenerateRequest;

impl GenerateRequest {
    /// The seed choice `choice` of a request samples with: the request's own for choice 0 (so
    /// `n: 1` is the plain request), a splitmix64 step of it and the index for the others, so
    /// the choices are independent draws and the same seed repeats every one of them.
    pub fn choice_seed(seed: u64, choice: usize) -> u64 {
        if choice == 0 {
            return seed;
        }
        crate::sampling::mix64(seed ^ (choice as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// Choices this request asks for (`n`, at least 1).
    pub fn choices(&self) -> usize {
        self.n.unwrap_or(1).max(1)
    }

    /// The sampler settings: greedy when `temperature` is 0, llama.cpp's defaults otherwise,
    /// with every given field applied on top (penalties apply to greedy too).
    pub fn sampler(&self) -> SamplerConfig {
        self.choice_sampler(0)
    }

    /// [`GenerateRequest::sampler`] for choice `choice` (its seed: [`GenerateRequest::choice_seed`]).
    pub fn choice_sampler(&self, choice: usize) -> SamplerConfig {
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
        c.seed = Self::choice_seed(c.seed, choice);
        if let Some(b) = &self.logit_bias {
            c = c.with_logit_bias(b.iter().map(|(&id, &bias)| (id, bias)));
        }
        c
    }
}
