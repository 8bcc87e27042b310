//! `edgellm inspect <model.gguf> [--json]`
pub fn run(_argv: &[String]) -> Result<(), String> {
    Err("not implemented yet".into())
}
