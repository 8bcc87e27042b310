//! Stop strings over streamed text: the one place that decides what text is final.

/// Holds back text that could be the start of a stop string, and cuts the text before a stop
/// string once one occurs. Text goes in as it is decoded ([`push`](Self::push)) and comes out
/// when it can no longer turn into a stop string ([`ready`](Self::ready)).
#[derive(Clone, Debug, Default)]
pub struct StopHold {
    stop: Vec<String>,
    /// All final text so far (cut before a stop string once one was found).
    pub text: String,
    emitted: usize,
    stopped: bool,
}

impl StopHold {
    /// Empty stop strings are ignored (they would match everywhere).
    pub fn new(stop: Vec<String>) -> StopHold {
        StopHold { stop: stop.into_iter().filter(|s| !s.is_empty()).collect(), ..StopHold::default() }
    }

    /// Appends `piece`; returns true when a stop string occurs (now or before).
    pub fn push(&mut self, piece: &str) -> bool {
        if self.stopped {
            return true;
        }
        // A match can start before the unemitted part only if it was held back, so searching
        // from `emitted` finds every new one.
        let from = self.emitted;
        self.text.push_str(piece);
        let cut = self.stop.iter().filter_map(|s| self.text[from..].find(s.as_str()).map(|i| from + i)).min();
        if let Some(c) = cut {
            self.text.truncate(c);
            self.stopped = true;
        }
        self.stopped
    }

    /// Returns the text that is safe to show now (all of it when `all`): everything but a
    /// tail that is a proper prefix of a stop string.
    pub fn ready(&mut self, all: bool) -> String {
        let mut end = self.text.len();
        if !all && !self.stopped {
            for s in &self.stop {
                // Longest suffix of the unemitted text (on a char boundary) that starts `s`.
                let max = s.len().saturating_sub(1).min(self.text.len() - self.emitted);
                for k in (1..=max).rev() {
                    let start = self.text.len() - k;
                    if self.text.is_char_boundary(start) && s.starts_with(&self.text[start..]) {
                        end = end.min(start);
                        break;
                    }
                }
            }
        }
        if end > self.emitted {
            let out = self.text[self.emitted..end].to_string();
            self.emitted = end;
            out
        } else {
            String::new()
        }
    }

    /// Drops the text not yet returned by `ready` (a generation abandoned mid-way keeps only
    /// what its reader saw).
    pub fn truncate_unemitted(&mut self) {
        self.text.truncate(self.emitted);
    }
}
