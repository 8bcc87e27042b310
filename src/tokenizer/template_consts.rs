//! What a chat template's constant expressions would build when minijinja compiles them.
//!
//! minijinja folds constant expressions while compiling (`'x' * 100000000` becomes one 100 MB
//! string constant in the compiled code, `a ~ a` of two such a 200 MB one), before any budget
//! of the rendering can see them: one tag of such terms asked for gigabytes, and a template of
//! many `{{ 'x' * 1000000 }}` keeps every one in memory. So the parsed template is walked first,
//! and the size every constant expression would fold to is estimated from its parts without
//! building it; a template whose constants would exceed [`MAX_CONSTANT_BYTES`] (one) or
//! [`MAX_CONSTANTS_BYTES`] (all, counted at each level of folding) is refused before it is
//! compiled. Real templates' constants are their own short literals.

use minijinja::machinery::ast::{BinOpKind, CallArg, Expr, Stmt};
use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::template_program::shown_len;

/// Largest value one constant expression may fold to (bytes as printed, or items).
pub const MAX_CONSTANT_BYTES: u64 = 1 << 20;
/// Largest sum of every folded constant's size in one template.
pub const MAX_CONSTANTS_BYTES: u64 = 16 << 20;

/// Refuses `template` when its constant expressions would fold to more than the limits allow.
pub fn check(template: &Stmt<'_>) -> Result<(), Error> {
    let mut walk = Walk { total: 0 };
    walk.stmt(template)
}

struct Walk {
    total: u64,
}

/// The message of the refusal ([`is_refusal`] recognises it).
const TOO_LARGE: &str = "chat template: its constant expressions would build more than the limits allow";

fn too_large() -> Error {
    Error::new(ErrorKind::InvalidOperation, TOO_LARGE)
}

/// Whether `e` is this check's refusal (the caller reports it as a template too costly).
pub fn is_refusal(e: &Error) -> bool {
    e.kind() == ErrorKind::InvalidOperation && e.detail() == Some(TOO_LARGE)
}

impl Walk {
    fn stmts(&mut self, body: &[Stmt<'_>]) -> Result<(), Error> {
        body.iter().try_for_each(|s| self.stmt(s))
    }

    fn stmt(&mut self, s: &Stmt<'_>) -> Result<(), Error> {
        match s {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr).map(drop),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => Ok(()),
            Stmt::ForLoop(f) => {
                self.expr(&f.target)?;
                self.expr(&f.iter)?;
                if let Some(e) = &f.filter_expr {
                    self.expr(e)?;
                }
                self.stmts(&f.body)?;
                self.stmts(&f.else_body)
            }
            Stmt::IfCond(c) => {
                self.expr(&c.expr)?;
                self.stmts(&c.true_body)?;
                self.stmts(&c.false_body)
            }
            Stmt::WithBlock(w) => {
                for (a, b) in &w.assignments {
                    self.expr(a)?;
                    self.expr(b)?;
                }
                self.stmts(&w.body)
            }
            Stmt::Set(x) => {
                self.expr(&x.target)?;
                self.expr(&x.expr).map(drop)
            }
            Stmt::SetBlock(x) => {
                self.expr(&x.target)?;
                if let Some(f) = &x.filter {
                    self.expr(f)?;
                }
                self.stmts(&x.body)
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled)?;
                self.stmts(&a.body)
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter)?;
                self.stmts(&f.body)
            }
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Import(i) => {
                self.expr(&i.expr)?;
                self.expr(&i.name).map(drop)
            }
            Stmt::FromImport(i) => {
                self.expr(&i.expr)?;
                for (a, b) in &i.names {
                    self.expr(a)?;
                    if let Some(b) = b {
                        self.expr(b)?;
                    }
                }
                Ok(())
            }
            Stmt::Extends(e) => self.expr(&e.name).map(drop),
            Stmt::Include(i) => self.expr(&i.name).map(drop),
            Stmt::Macro(m) => {
                self.exprs(&m.args)?;
                self.exprs(&m.defaults)?;
                self.stmts(&m.body)
            }
            Stmt::CallBlock(c) => {
                self.expr(&c.call.expr)?;
                self.args(&c.call.args)?;
                self.exprs(&c.macro_decl.args)?;
                self.exprs(&c.macro_decl.defaults)?;
                self.stmts(&c.macro_decl.body)
            }
            Stmt::Do(d) => {
                self.expr(&d.call.expr)?;
                self.args(&d.call.args)
            }
        }
    }

    fn exprs(&mut self, es: &[Expr<'_>]) -> Result<(), Error> {
        es.iter().try_for_each(|e| self.expr(e).map(drop))
    }

    fn args(&mut self, args: &[CallArg<'_>]) -> Result<(), Error> {
        for a in args {
            match a {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e).map(drop)?,
            }
        }
        Ok(())
    }

    /// The size `e` folds to (printed bytes, at least 1), `None` when it is not constant;
    /// refuses it when too large. Mirrors which expressions minijinja folds: constants, lists
    /// and maps of literal constants, unary and binary operators and comparisons of constants.
    fn expr(&mut self, e: &Expr<'_>) -> Result<Option<u64>, Error> {
        let size = match e {
            Expr::Const(c) => Some(shown_len(&c.value, MAX_CONSTANT_BYTES).max(1)),
            Expr::Var(_) => None,
            Expr::List(l) => {
                let mut all = Some(0u64);
                for item in &l.items {
                    let s = self.expr(item)?;
                    all = match (all, s, matches!(item, Expr::Const(_))) {
                        (Some(a), Some(s), true) => Some(a.saturating_add(s).saturating_add(2)),
                        _ => None,
                    };
                }
                all
            }
            Expr::Map(m) => {
                let mut all = Some(0u64);
                for (k, v) in m.keys.iter().zip(&m.values) {
                    let (a, b) = (self.expr(k)?, self.expr(v)?);
                    all = match (all, a, b, matches!(k, Expr::Const(_)) && matches!(v, Expr::Const(_))) {
                        (Some(t), Some(a), Some(b), true) => Some(t.saturating_add(a).saturating_add(b).saturating_add(4)),
                        _ => None,
                    };
                }
                all
            }
            Expr::UnaryOp(u) => self.expr(&u.expr)?.map(|_| 24),
            Expr::Compare(c) => {
                let mut all = self.expr(&c.expr)?.is_some();
                for op in &c.ops {
                    all &= self.expr(&op.expr)?.is_some();
                }
                all.then_some(1)
            }
            Expr::BinOp(b) => {
                let (l, r) = (self.expr(&b.left)?, self.expr(&b.right)?);
                match (l, r) {
                    (Some(l), Some(r)) => Some(binop_size(b.op, &b.left, l, &b.right, r)),
                    _ => None,
                }
            }
            Expr::Slice(s) => {
                self.expr(&s.expr)?;
                for part in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(part)?;
                }
                None
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr)?;
                self.expr(&i.true_expr)?;
                if let Some(f) = &i.false_expr {
                    self.expr(f)?;
                }
                None
            }
            Expr::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x)?;
                }
                self.args(&f.args)?;
                None
            }
            Expr::Test(t) => {
                self.expr(&t.expr)?;
                self.args(&t.args)?;
                None
            }
            Expr::GetAttr(g) => self.expr(&g.expr)?.and(None),
            Expr::GetItem(g) => {
                self.expr(&g.expr)?;
                self.expr(&g.subscript_expr)?;
                None
            }
            Expr::Call(c) => {
                self.expr(&c.expr)?;
                self.args(&c.args)?;
                None
            }
        };
        if let Some(s) = size {
            self.total = self.total.saturating_add(s);
            if s > MAX_CONSTANT_BYTES || self.total > MAX_CONSTANTS_BYTES {
                return Err(too_large());
            }
        }
        Ok(size)
    }
}

/// The printed size of `left op right` folded, from the operands' sizes (each within
/// [`MAX_CONSTANT_BYTES`], so folding an operand to read a repeat count is bounded).
fn binop_size(op: BinOpKind, left: &Expr<'_>, l: u64, right: &Expr<'_>, r: u64) -> u64 {
    match op {
        BinOpKind::Concat | BinOpKind::Add => l.saturating_add(r),
        BinOpKind::ScAnd | BinOpKind::ScOr => l.max(r),
        BinOpKind::Mul => {
            // A string or a sequence repeated n times; numbers otherwise.
            let count = |e: &Expr<'_>| e.as_const().filter(|v| v.kind() == ValueKind::Number).and_then(|v: Value| v.as_usize()).map(|n| n as u64);
            match (count(left), count(right)) {
                (Some(_), Some(_)) => 24,
                (Some(n), None) => r.saturating_mul(n),
                (None, Some(n)) => l.saturating_mul(n),
                (None, None) => l.max(r),
            }
        }
        _ => l.max(r).max(24),
    }
}
