//! A small argument parser: positionals, `--flag`, `--key value` and `--key=value`.
//! Every subcommand declares which options take a value, so a typo is an error, not a silent
//! positional.

use std::collections::HashMap;

pub struct Args {
    pub positionals: Vec<String>,
    values: HashMap<String, String>,
    flags: Vec<String>,
}

impl Args {
    /// `with_value`: option names (without `--`) that take a value; `flags`: those that don't.
    pub fn parse(argv: &[String], with_value: &[&str], flags: &[&str]) -> Result<Args, String> {
        let mut a = Args { positionals: Vec::new(), values: HashMap::new(), flags: Vec::new() };
        let mut i = 0;
        while i < argv.len() {
            let arg = &argv[i];
            if let Some(name) = arg.strip_prefix("--") {
                let (name, inline) = match name.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (name, None),
                };
                if with_value.contains(&name) {
                    let v = match inline {
                        Some(v) => v,
                        None => {
                            i += 1;
                            argv.get(i).cloned().ok_or_else(|| format!("--{name} needs a value"))?
                        }
                    };
                    a.values.insert(name.to_string(), v);
                } else if flags.contains(&name) && inline.is_none() {
                    a.flags.push(name.to_string());
                } else {
                    return Err(format!("unknown option --{name}"));
                }
            } else {
                a.positionals.push(arg.clone());
            }
            i += 1;
        }
        Ok(a)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.value(name).ok_or_else(|| format!("--{name} is required"))
    }

    /// A parsed value, with a clear error naming the option.
    pub fn parsed<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        match self.value(name) {
            None => Ok(None),
            Some(v) => v.parse().map(Some).map_err(|_| format!("--{name}: cannot parse {v:?}")),
        }
    }

    /// A count within `min..=max` (the engine's limits, `edgellm::limits`): `--max-tokens
    /// 18446744073709551615` is refused with the range instead of wrapping a sum later.
    pub fn count(&self, name: &'static str, min: usize, max: usize) -> Result<Option<usize>, String> {
        let Some(v) = self.parsed::<u64>(name)? else { return Ok(None) };
        edgellm::limits::check_range(name, v, min as u64, max as u64).map_err(|e| format!("--{e} [{}]", e.code()))?;
        Ok(Some(v as usize))
    }

    /// A comma-separated list of token ids such as `2,818,5279`.
    pub fn ids(&self, name: &str) -> Result<Option<Vec<u32>>, String> {
        match self.value(name) {
            None => Ok(None),
            Some(v) => v
                .split(',')
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().parse::<u32>().map_err(|_| format!("--{name}: bad id {s:?}")))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
        }
    }
}
