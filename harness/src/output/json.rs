//! JSON output: serde_json with mmlab's spelling of numbers and strings.
//!
//! Every JSON report of `mmlab` is a struct deriving `serde::Serialize`,
//! written here by serde_json on one line. Two details of the text are
//! mmlab's and predate the switch to serde, so they are kept rather than
//! changing every report's bytes:
//!
//! - a float is written as Rust's `Display` writes an `f64`: the shortest
//!   digits that read back to the same value, never in exponent notation
//!   and without a `.0` on whole numbers (`2`, `0.0000001`,
//!   `100000000000000000000`), where serde_json would write `2.0`, `1e-7`
//!   and `1e20`. A NaN or infinity is `null`, as serde_json writes it.
//! - a control character in a string is `\n`, `\r`, `\t` or `\u00XX`
//!   (lower-case hex); serde_json alone would write backspace and form feed
//!   as `\b` and `\f`.
//!
//! [`Mmlab`] is the serde_json `Formatter` that does both; [`to_string`]
//! and [`to_line`] use it.

use serde::Serialize;
use serde_json::ser::{CharEscape, CompactFormatter, Formatter};
use std::io;

/// serde_json's compact formatter with mmlab's floats and escapes (module
/// docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mmlab;

impl Formatter for Mmlab {
    fn write_f64<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        write!(w, "{value}")
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, w: &mut W, value: f32) -> io::Result<()> {
        write!(w, "{value}")
    }

    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        match escape {
            CharEscape::Backspace => w.write_all(b"\\u0008"),
            CharEscape::FormFeed => w.write_all(b"\\u000c"),
            other => CompactFormatter.write_char_escape(w, other),
        }
    }
}

/// `value` as one line of JSON, without a newline.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Mmlab);
    // Serialising mmlab's report types cannot fail: their maps have string
    // keys and they hold no type serde_json refuses.
    value.serialize(&mut ser).expect("a report serialises to JSON");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// `value` as one line of JSON, with a newline.
pub fn to_line<T: Serialize + ?Sized>(value: &T) -> String {
    let mut s = to_string(value);
    s.push('\n');
    s
}

/// A JSON string literal (`"..."`, escaped as in the module docs).
pub fn str_literal(s: &str) -> String {
    to_string(s)
}

/// Serialise `(name, value)` pairs as a JSON object in their order (for
/// `serialize_with` on a list of named counters).
///
/// # Errors
///
/// Whatever the serializer returns.
pub fn pairs_as_map<S, K, V>(pairs: &[(K, V)], s: S) -> Result<S::Ok, S::Error>
where
    S: serde::Serializer,
    K: Serialize,
    V: Serialize,
{
    s.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_display() {
        assert_eq!(
            to_string(&[2.0, 0.1, 1e-7, 1e20, -0.0, f64::NAN, f64::INFINITY, 1.5]),
            "[2,0.1,0.0000001,100000000000000000000,-0,null,null,1.5]"
        );
    }

    #[test]
    fn strings_escaped() {
        assert_eq!(str_literal("a\"b\\c\n\u{1}\u{8}\u{c}\t/é"), "\"a\\\"b\\\\c\\n\\u0001\\u0008\\u000c\\t/é\"");
        assert_eq!(str_literal("\r\u{1f}\u{7f}"), "\"\\r\\u001f\u{7f}\"");
    }
}
