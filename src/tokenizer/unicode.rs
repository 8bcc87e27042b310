//! Code point classes the BPE pre-tokenizers split on: general category (\p{L}, \p{N}, ...) and
//! the Unicode White_Space property (\s). Categories come from the generated `unicode_table`
//! (Unicode 15.1, the version llama.cpp's tables follow).

use super::unicode_table::CATEGORY_RUNS;

/// General category, collapsed to its major class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Cat {
    /// Unassigned (Cn), and anything beyond U+10FFFF.
    Undefined = 0,
    Number = 1,
    Letter = 2,
    Separator = 3,
    Mark = 4,
    Punctuation = 5,
    Symbol = 6,
    Control = 7,
}

impl Cat {
    fn from_code(c: u8) -> Cat {
        match c {
            1 => Cat::Number,
            2 => Cat::Letter,
            3 => Cat::Separator,
            4 => Cat::Mark,
            5 => Cat::Punctuation,
            6 => Cat::Symbol,
            7 => Cat::Control,
            _ => Cat::Undefined,
        }
    }
}

/// The major category of `cp`.
pub fn category(cp: u32) -> Cat {
    if cp >= 0x11_0000 {
        return Cat::Undefined;
    }
    // The last run whose first code point is <= cp.
    let idx = CATEGORY_RUNS.partition_point(|&run| (run >> 8) <= cp);
    match idx.checked_sub(1) {
        Some(i) => Cat::from_code((CATEGORY_RUNS[i] & 0xff) as u8),
        None => Cat::Undefined,
    }
}

/// The Unicode White_Space property (PropList.txt). Note U+001C..U+001F are *not* in it, although
/// Python's `str.isspace` says they are.
pub fn is_whitespace(cp: u32) -> bool {
    matches!(
        cp,
        0x09..=0x0D
            | 0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// What the pre-tokenizers ask about one position of a split: the code point's class, or
/// `NONE` for a position outside the piece being split (then every test is false).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub cat: Option<Cat>,
    pub whitespace: bool,
}

impl Flags {
    pub const NONE: Flags = Flags {
        cat: None,
        whitespace: false,
    };

    pub fn of(cp: u32) -> Flags {
        Flags {
            cat: Some(category(cp)),
            whitespace: is_whitespace(cp),
        }
    }
    pub fn letter(self) -> bool {
        self.cat == Some(Cat::Letter)
    }
    pub fn number(self) -> bool {
        self.cat == Some(Cat::Number)
    }
    /// Inside the piece (any real code point, even an unassigned one).
    pub fn present(self) -> bool {
        self.cat.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_of_known_code_points() {
        assert_eq!(category('a' as u32), Cat::Letter);
        assert_eq!(category('Z' as u32), Cat::Letter);
        assert_eq!(category('7' as u32), Cat::Number);
        assert_eq!(category(' ' as u32), Cat::Separator);
        assert_eq!(category('\n' as u32), Cat::Control);
        assert_eq!(category('!' as u32), Cat::Punctuation);
        assert_eq!(category('$' as u32), Cat::Symbol);
        assert_eq!(category('`' as u32), Cat::Symbol);
        assert_eq!(category(0x0301), Cat::Mark); // combining acute
        assert_eq!(category('中' as u32), Cat::Letter);
        assert_eq!(category('٣' as u32), Cat::Number); // Arabic-Indic three
        assert_eq!(category('…' as u32), Cat::Punctuation);
        assert_eq!(category(0x1F600), Cat::Symbol); // 😀
        assert_eq!(category(0x0378), Cat::Undefined); // unassigned
        assert_eq!(category(0x10FFFF), Cat::Undefined);
        assert_eq!(category(0x11_0000), Cat::Undefined);
        // Assigned in Unicode 15.1 (CJK Extension I), unassigned before 15.1.
        assert_eq!(category(0x2EBF0), Cat::Letter);
    }

    #[test]
    fn whitespace_is_the_unicode_property() {
        for c in ['\t', '\n', '\r', ' ', '\u{a0}', '\u{3000}', '\u{2009}'] {
            assert!(is_whitespace(c as u32), "{c:?}");
        }
        for c in ['\u{1c}', '\u{1f}', 'a', '\u{200b}'] {
            assert!(!is_whitespace(c as u32), "{c:?}");
        }
    }
}
