//! A chat template as the program minijinja runs, rewritten so that what its instructions build
//! natively is charged before it is built.
//!
//! Fuel counts instructions, not bytes: `{% set ns.s = ns.s ~ ns.s %}` doubles a string in one
//! instruction, so 40 iterations asked for terabytes (an allocation failure aborts the process,
//! natively and in wasm), and `{% set ns.s %}{{ ns.s }}{{ ns.s }}{% endset %}` doubles it through
//! a capture the output limit never saw. Values nest one level per instruction too (`{% set ns.x
//! = [ns.x] %}`), and minijinja drops, compares and prints them recursively: 100,000 levels
//! overflowed the wasm engine's 1 MiB stack when the rendering ended. minijinja has no hook on
//! its operators, on captures or on namespaces, so the template is compiled here with
//! minijinja's own compiler and each such instruction is redirected through a short trampoline
//! appended after the code (a check, then the instruction itself, so every result is exactly
//! what minijinja computes):
//!
//! - `~`, `+`, `*`: the result's size (bytes of a string or of a printed value, items of joined
//!   lists) is charged to the work budget;
//! - raw template text written (`EmitRaw`), like every printed value (the formatter, installed by
//!   the caller), is charged to the output budget wherever it goes: the prompt or a capture;
//! - a value stored into a namespace (`{% set ns.x = ... %}`) is collected into a list when it
//!   is a lazy sequence (`reverse`, `items`, slices, `*` and `+` on lists wrap their input, one
//!   wrapper per iteration otherwise), then refused when it nests deeper than
//!   [`MAX_VALUE_DEPTH`](super::template_filters::MAX_VALUE_DEPTH) levels (a walk charged per item). A namespace is the only place where a
//!   value outlives a loop iteration (`set` is scoped to one); within one iteration a value is
//!   bounded by the template's own size and minijinja's recursion limit.

use std::fmt::{self, Write as _};

use minijinja::machinery::{make_string_output, parse, CodeGenerator, CompiledTemplate, Instruction, Instructions, Vm, WhitespaceConfig};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind};

use super::template_filters::walk_nested;
use super::template_consts;
use super::template_work::WorkBudget;

/// The functions the trampolines call: names a template cannot write (`:` is not part of an
/// identifier), so a template can neither call nor shadow them.
const CONCAT: &str = "budget:concat";
const ADD: &str = "budget:add";
const MUL: &str = "budget:mul";
const WRITE: &str = "budget:write";
const KEPT: &str = "budget:kept";

/// Compiles `source` as llama.cpp's chat-template engine reads it (`trim_blocks`,
/// `lstrip_blocks`, no auto-escaping), once its constants are known to fold within limits, and
/// rewrites it as the module docs say.
pub fn compile<'s>(source: &'s str) -> Result<CompiledTemplate<'s>, Error> {
    let ws = WhitespaceConfig { keep_trailing_newline: false, lstrip_blocks: true, trim_blocks: true };
    // Parsed once: checked (minijinja folds constant expressions while compiling: see
    // `template_consts`), then compiled as `CompiledTemplate::new` does.
    let ast = parse(source, "chat", SyntaxConfig, ws)?;
    template_consts::check(&ast)?;
    let mut codegen = CodeGenerator::new("chat", source);
    codegen.compile_stmt(&ast);
    let buffer_size_hint = codegen.buffer_size_hint();
    let (instructions, blocks) = codegen.finish();
    let mut compiled = CompiledTemplate { instructions, blocks, buffer_size_hint, syntax_config: SyntaxConfig, initial_auto_escape: AutoEscape::None };
    rewrite(&mut compiled.instructions);
    for block in compiled.blocks.values_mut() {
        rewrite(block);
    }
    Ok(compiled)
}

/// Runs `compiled` with `root` as its context, into a string. The caller's formatter and the
/// functions of [`install`] bound what it builds.
pub fn render(env: &Environment<'_>, compiled: &CompiledTemplate<'_>, root: Value) -> Result<String, Error> {
    let mut text = String::new();
    let mut out = make_string_output(&mut text);
    Vm::new(env).eval(&compiled.instructions, root, &compiled.blocks, &mut out, compiled.initial_auto_escape)?;
    Ok(text)
}

/// Registers the trampolines' functions on `env`, charging `work` and `output`.
pub fn install(env: &mut Environment<'_>, work: &WorkBudget, output: &WorkBudget) {
    let w = work.clone();
    env.add_function(CONCAT, move |a: Value, b: Value| -> Result<Value, Error> {
        let cost = shown_len(&a, w.left()).saturating_add(shown_len(&b, w.left()));
        w.charge(cost)?;
        Ok(operands(a, b))
    });
    let w = work.clone();
    env.add_function(ADD, move |a: Value, b: Value| -> Result<Value, Error> {
        let cost = match (a.as_str(), b.as_str()) {
            (Some(x), Some(y)) => (x.len() as u64).saturating_add(y.len() as u64),
            // Lists are joined lazily, but a namespace keeps the join as a list.
            _ if is_sequence(&a) && is_sequence(&b) => items(&a).saturating_add(items(&b)),
            _ => 1,
        };
        w.charge(cost)?;
        Ok(operands(a, b))
    });
    let w = work.clone();
    env.add_function(MUL, move |a: Value, b: Value| -> Result<Value, Error> {
        let times = |n: &Value| n.as_usize().map_or(1, |n| n as u64);
        if let Some(s) = a.as_str() {
            w.charge((s.len() as u64).saturating_mul(times(&b)))?;
        } else if let Some(s) = b.as_str() {
            w.charge((s.len() as u64).saturating_mul(times(&a)))?;
        } else {
            w.charge(1)?;
        }
        Ok(operands(a, b))
    });
    let o = output.clone();
    env.add_function(WRITE, move |n: u64| -> Result<(), Error> { o.charge(n) });
    let w = work.clone();
    env.add_function(KEPT, move |v: Value| -> Result<Value, Error> {
        let v = collect_lazy(v, &w)?;
        check_nesting(&v, &w)?;
        Ok(v)
    });
}

/// The operands `a`, `b` as the trampoline's `UnpackList(2)` puts them back on the stack (it
/// pushes a list's items in reverse order).
fn operands(a: Value, b: Value) -> Value {
    Value::from(vec![b, a])
}

/// Bytes `v` prints as (what `~` writes), counted up to just past `cap` without building it.
pub fn shown_len(v: &Value, cap: u64) -> u64 {
    if let Some(s) = v.as_str() {
        return s.len() as u64;
    }
    struct Count {
        n: u64,
        cap: u64,
    }
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.n = self.n.saturating_add(s.len() as u64);
            if self.n > self.cap {
                Err(fmt::Error)
            } else {
                Ok(())
            }
        }
    }
    let mut count = Count { n: 0, cap };
    let _ = write!(count, "{v}");
    count.n
}

fn is_sequence(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// Items of a sequence (at least 1).
fn items(v: &Value) -> u64 {
    v.len().map_or(1, |n| n as u64).max(1)
}

/// `v` as a plain list when it is a sequence over something else (a lazy wrapper: `reverse`,
/// `items`, a slice, `*`, `+`), charged one unit per item; any other value as it is.
fn collect_lazy(v: Value, budget: &WorkBudget) -> Result<Value, Error> {
    if !is_sequence(&v) || v.downcast_object_ref::<Vec<Value>>().is_some() {
        return Ok(v);
    }
    const CHUNK: usize = 1024;
    let mut all = Vec::new();
    for x in v.try_iter()? {
        all.push(x);
        if all.len() % CHUNK == 0 {
            budget.charge(CHUNK as u64)?;
        }
    }
    budget.charge((all.len() % CHUNK) as u64 + 1)?;
    Ok(Value::from(all))
}

/// Refuses `v` when it nests deeper than [`MAX_VALUE_DEPTH`](super::template_filters::MAX_VALUE_DEPTH) levels (sequences, maps and
/// namespaces), one unit of `budget` per item walked, or when it holds a `loop` object: a loop
/// holds its iterable out of the walk's sight, so `{% for x in [ns.l] %}{% set ns.l = loop %}`
/// in a loop chained one loop per iteration (no template keeps one).
fn check_nesting(v: &Value, budget: &WorkBudget) -> Result<(), Error> {
    let no_loop = |x: &Value| match x.kind() == ValueKind::Map && is_loop(x) {
        true => Err(Error::new(ErrorKind::InvalidOperation, "chat template: a loop object cannot be kept in a namespace")),
        false => Ok(()),
    };
    walk_nested(v, true, no_loop, || budget.charge(1))
}

/// Whether `v` is minijinja's `loop` object: a map whose first attribute is `index0` and that
/// prints as `<loop i/n>` (a plain map prints as `{...}`).
fn is_loop(v: &Value) -> bool {
    v.as_object().is_some() && v.try_iter().ok().and_then(|mut keys| keys.next()).is_some_and(|k| k.as_str() == Some("index0")) && v.to_string().starts_with("<loop ")
}

/// Redirects the instructions the module docs name through trampolines appended after the code.
fn rewrite(code: &mut Instructions<'_>) {
    let end = code.len();
    if end == 0 {
        return;
    }
    let last_line = code.get_line(end as u32 - 1).unwrap_or(0) as u16;
    // The code used to end by running past its last instruction: it now ends here, before the
    // trampolines.
    code.add_with_line(Instruction::Return, last_line);
    for i in 0..end as u32 {
        let Some(instr) = code.get(i).cloned() else { continue };
        let line = code.get_line(i).unwrap_or(0) as u16;
        let body: Vec<Instruction<'_>> = match instr {
            Instruction::StringConcat => vec![Instruction::CallFunction(CONCAT, Some(2)), Instruction::UnpackList(2), instr],
            Instruction::Add => vec![Instruction::CallFunction(ADD, Some(2)), Instruction::UnpackList(2), instr],
            Instruction::Mul => vec![Instruction::CallFunction(MUL, Some(2)), Instruction::UnpackList(2), instr],
            Instruction::EmitRaw(text) => vec![
                Instruction::LoadConst(Value::from(text.len())),
                Instruction::CallFunction(WRITE, Some(1)),
                Instruction::DiscardTop,
                instr,
            ],
            // The stack holds the value, then the namespace.
            Instruction::SetAttr(_) => vec![Instruction::Swap, Instruction::CallFunction(KEPT, Some(1)), Instruction::Swap, instr],
            _ => continue,
        };
        let start = code.len() as u32;
        for b in body {
            code.add_with_line(b, line);
        }
        code.add_with_line(Instruction::Jump(i + 1), line);
        if let Some(slot) = code.get_mut(i) {
            *slot = Instruction::Jump(start);
        }
    }
}
