//! RFC 9651 Structured Field Values: a validating, zero-copy parser and a canonical
//! serializer, the one of the project (AI-usage preferences read `Content-Usage` with it;
//! robotsgate's Web Bot Auth reads and writes `Signature-Input`, `Signature` and
//! `Signature-Agent` with it).
//!
//! **Parsing** checks the whole value against the RFC's algorithms (§4.2) first, so a value
//! that does not parse fails as a whole, as §4.2 requires. What comes back are views into
//! the input: nothing is allocated and the time is linear in the input. Every type of
//! RFC 9651 is understood: Integers and Decimals (digit limits), Strings (escapes), Tokens,
//! Byte Sequences (base64, missing padding synthesised and non-zero pad bits accepted, as
//! §4.2.7 recommends), Booleans, Dates, Display Strings (lower-case `%xx` escapes of valid
//! UTF-8), Inner Lists and Parameters. Inner lists and parameters are views over text that
//! was already checked: iterating them parses that text again, lazily.
//!
//! Duplicate keys (dictionary members, parameters) are kept as they came by the iterators;
//! `get` returns the **last** value, as §4.2.2 and §4.2.3.2 say ("overwrite"), and the
//! canonical serialization writes a key once, at its first place, with its last value.
//!
//! **Serializing** (§4.1) writes into a `String`: the `write_*` functions build values from
//! Rust values (checking what the RFC requires: string characters, token and key grammar,
//! integer range), and [`write_member`], [`write_item`], [`write_params`] … write parsed
//! values back in canonical form (RFC 9421 signs that form of `Signature-Input` members).
//!
//! ```
//! use robotsgate_rep::sf::{self, BareItem, Dictionary};
//!
//! let d = Dictionary::parse(br#"sig1=("@authority" "signature-agent";key="sig1");created=1;tag="web-bot-auth""#)?;
//! let list = d.get("sig1").and_then(|m| m.as_inner_list()).unwrap();
//! assert_eq!(list.params().get("created"), Some(BareItem::Integer(1)));
//! assert_eq!(list.params().get("tag").and_then(|t| t.as_string()).unwrap().value(), "web-bot-auth");
//! let components: Vec<String> = list.iter().map(|i| i.bare.as_string().unwrap().value().into()).collect();
//! assert_eq!(components, ["@authority", "signature-agent"]);
//!
//! let mut out = String::new();
//! sf::write_inner_list(&mut out, &list);
//! assert_eq!(out, r#"("@authority" "signature-agent";key="sig1");created=1;tag="web-bot-auth""#);
//! # Ok::<(), sf::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt;

/// Why a value did not parse (the byte offset where it stopped), or could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The input does not parse; at this byte offset.
    Parse {
        /// Where parsing stopped (a byte offset into the input).
        offset: usize,
    },
    /// A value cannot be serialized: what is wrong with it.
    Serialize(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Parse { offset } => write!(f, "not a structured field value (at byte {offset})"),
            Error::Serialize(why) => write!(f, "cannot serialize a structured field value: {why}"),
        }
    }
}

impl std::error::Error for Error {}

type R<T> = Result<T, Error>;

/// The largest Integer (and, in thousandths, about the largest Decimal) RFC 9651 allows.
const MAX_INTEGER: i64 = 999_999_999_999_999;

/// `bytes` as text; every caller hands it ASCII that the grammar already checked.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or_default()
}

/// A Decimal (§3.3.2), held exactly in thousandths (at most 12 integer digits and 3
/// fractional ones, so it fits an `i64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Decimal(i64);

impl Decimal {
    /// The decimal `thousandths / 1000`; `None` past RFC 9651's 12 integer digits.
    pub fn from_thousandths(thousandths: i64) -> Option<Decimal> {
        (thousandths.unsigned_abs() < 1_000_000_000_000_000).then_some(Decimal(thousandths))
    }

    /// The value in thousandths.
    pub fn thousandths(self) -> i64 {
        self.0
    }

    /// The value as a float (exact to the three decimals it has).
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
}

/// A String (§3.3.3) as it was written, between its quotes: escapes (`\"`, `\\`) still in.
/// Its characters are printable ASCII.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SfString<'a>(&'a str);

impl<'a> SfString<'a> {
    /// The text with its escapes resolved (borrowed when it had none).
    pub fn value(&self) -> Cow<'a, str> {
        if !self.0.contains('\\') {
            return Cow::Borrowed(self.0);
        }
        let mut s = String::with_capacity(self.0.len());
        let mut escaped = false;
        for c in self.0.chars() {
            if c == '\\' && !escaped {
                escaped = true;
                continue;
            }
            escaped = false;
            s.push(c);
        }
        Cow::Owned(s)
    }

    /// The text as written between the quotes (escapes included): also its canonical form.
    pub fn raw(&self) -> &'a str {
        self.0
    }

    /// Whether the value (escapes resolved) is `s`, without allocating.
    pub fn is(&self, s: &str) -> bool {
        if !self.0.contains('\\') {
            return self.0 == s;
        }
        self.value() == s
    }
}

/// A Byte Sequence (§3.3.5) as it was written between its colons: base64, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ByteSequence<'a>(&'a [u8]);

impl ByteSequence<'_> {
    /// The decoded bytes.
    pub fn decode(&self) -> Vec<u8> {
        base64_decode(self.0)
    }

    /// The base64 text as written.
    pub fn raw(&self) -> &str {
        ascii(self.0)
    }
}

/// A Display String (§3.3.8) as it was written between `%"` and `"`: `%xx` escapes of
/// UTF-8 still in (checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DisplayString<'a>(&'a [u8]);

impl DisplayString<'_> {
    /// The text, escapes decoded.
    pub fn value(&self) -> String {
        let mut bytes = Vec::with_capacity(self.0.len());
        let mut i = 0;
        while let Some(&c) = self.0.get(i) {
            if c == b'%' {
                let hex = |c: Option<&u8>| match c {
                    Some(&c @ b'0'..=b'9') => c - b'0',
                    Some(&c @ b'a'..=b'f') => c - b'a' + 10,
                    _ => 0,
                };
                bytes.push((hex(self.0.get(i + 1)) << 4) | hex(self.0.get(i + 2)));
                i += 3;
            } else {
                bytes.push(c);
                i += 1;
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// A Bare Item (§3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BareItem<'a> {
    /// An Integer.
    Integer(i64),
    /// A Decimal.
    Decimal(Decimal),
    /// A String.
    String(SfString<'a>),
    /// A Token.
    Token(&'a str),
    /// A Byte Sequence.
    ByteSequence(ByteSequence<'a>),
    /// A Boolean.
    Boolean(bool),
    /// A Date (seconds since the Unix epoch).
    Date(i64),
    /// A Display String.
    DisplayString(DisplayString<'a>),
}

impl<'a> BareItem<'a> {
    /// The Integer, if it is one.
    pub fn as_integer(&self) -> Option<i64> {
        match self {
            BareItem::Integer(i) => Some(*i),
            _ => None,
        }
    }

    /// The String, if it is one.
    pub fn as_string(&self) -> Option<SfString<'a>> {
        match self {
            BareItem::String(s) => Some(*s),
            _ => None,
        }
    }

    /// The Token, if it is one.
    pub fn as_token(&self) -> Option<&'a str> {
        match self {
            BareItem::Token(t) => Some(t),
            _ => None,
        }
    }

    /// The Byte Sequence, if it is one.
    pub fn as_byte_sequence(&self) -> Option<ByteSequence<'a>> {
        match self {
            BareItem::ByteSequence(b) => Some(*b),
            _ => None,
        }
    }

    /// The Boolean, if it is one.
    pub fn as_boolean(&self) -> Option<bool> {
        match self {
            BareItem::Boolean(b) => Some(*b),
            _ => None,
        }
    }
}

/// Parameters (§3.1.2): a view over checked text; empty when there are none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Params<'a> {
    raw: &'a [u8],
}

impl<'a> Params<'a> {
    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Every parameter in order, duplicates included. A parameter without a value is
    /// `Boolean(true)`.
    pub fn iter(&self) -> ParamsIter<'a> {
        ParamsIter { c: Cursor { s: self.raw, i: 0 } }
    }

    /// The value of `key` (the last one when it is repeated).
    pub fn get(&self, key: &str) -> Option<BareItem<'a>> {
        self.iter().filter(|(k, _)| *k == key).last().map(|(_, v)| v)
    }

    /// The parameters as written (from the first `;`, spaces after each `;` included).
    pub fn raw(&self) -> &'a str {
        ascii(self.raw)
    }
}

/// The iterator of [`Params::iter`].
#[derive(Debug, Clone)]
pub struct ParamsIter<'a> {
    c: Cursor<'a>,
}

impl<'a> Iterator for ParamsIter<'a> {
    type Item = (&'a str, BareItem<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.c.peek() != Some(b';') {
            return None;
        }
        self.c.i += 1;
        self.c.skip_sp();
        let key = self.c.key().ok()?;
        if self.c.peek() == Some(b'=') {
            self.c.i += 1;
            Some((key, self.c.bare_item().ok()?))
        } else {
            Some((key, BareItem::Boolean(true)))
        }
    }
}

/// An Item (§3.3): a bare item and its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item<'a> {
    /// The value.
    pub bare: BareItem<'a>,
    /// Its parameters.
    pub params: Params<'a>,
}

/// An Inner List (§3.1.1): a view over checked text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InnerList<'a> {
    /// Between the parentheses.
    items: &'a [u8],
    params: Params<'a>,
}

impl<'a> InnerList<'a> {
    /// Its items, in order.
    pub fn iter(&self) -> InnerListIter<'a> {
        InnerListIter { c: Cursor { s: self.items, i: 0 } }
    }

    /// The parameters of the list itself.
    pub fn params(&self) -> Params<'a> {
        self.params
    }

    /// How many items it has (parses them: linear).
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether it has no items.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// The iterator of [`InnerList::iter`].
#[derive(Debug, Clone)]
pub struct InnerListIter<'a> {
    c: Cursor<'a>,
}

impl<'a> Iterator for InnerListIter<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        self.c.skip_sp();
        if self.c.done() {
            return None;
        }
        self.c.item().ok()
    }
}

/// A member of a List or the value of a Dictionary member: an Item or an Inner List.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Member<'a> {
    /// An Item (in a Dictionary, a key without `=` is `Boolean(true)` with its parameters).
    Item(Item<'a>),
    /// An Inner List.
    InnerList(InnerList<'a>),
}

impl<'a> Member<'a> {
    /// The Item, if it is one.
    pub fn as_item(&self) -> Option<Item<'a>> {
        match self {
            Member::Item(i) => Some(*i),
            Member::InnerList(_) => None,
        }
    }

    /// The Inner List, if it is one.
    pub fn as_inner_list(&self) -> Option<InnerList<'a>> {
        match self {
            Member::InnerList(l) => Some(*l),
            Member::Item(_) => None,
        }
    }

    /// The bare Token of an Item (parameters ignored), if it is one.
    pub fn as_token(&self) -> Option<&'a str> {
        self.as_item().and_then(|i| i.bare.as_token())
    }
}

/// A Dictionary (§3.2): a view over a checked field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dictionary<'a> {
    raw: &'a [u8],
}

impl<'a> Dictionary<'a> {
    /// Parses `input` (§4.2 with §4.2.2); fails as a whole when any of it does not parse.
    pub fn parse(input: &'a [u8]) -> Result<Dictionary<'a>, Error> {
        let mut c = Cursor { s: input, i: 0 };
        c.skip_sp();
        while !c.done() {
            c.dictionary_member()?;
            if !c.separator()? {
                break;
            }
        }
        c.skip_sp();
        if c.done() { Ok(Dictionary { raw: input }) } else { c.fail() }
    }

    /// Every member in order, duplicates included.
    pub fn iter(&self) -> DictionaryIter<'a> {
        DictionaryIter { c: Cursor { s: self.raw, i: 0 } }
    }

    /// The value of `key` (the last one when it is repeated).
    pub fn get(&self, key: &str) -> Option<Member<'a>> {
        self.iter().filter(|(k, _)| *k == key).last().map(|(_, v)| v)
    }

    /// Whether it has no members.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

/// The iterator of [`Dictionary::iter`].
#[derive(Debug, Clone)]
pub struct DictionaryIter<'a> {
    c: Cursor<'a>,
}

impl<'a> Iterator for DictionaryIter<'a> {
    type Item = (&'a str, Member<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.c.skip_ows();
        if self.c.peek() == Some(b',') {
            self.c.i += 1;
            self.c.skip_ows();
        }
        if self.c.done() {
            return None;
        }
        self.c.dictionary_member().ok()
    }
}

/// A List (§3.1): a view over a checked field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct List<'a> {
    raw: &'a [u8],
}

impl<'a> List<'a> {
    /// Parses `input` (§4.2 with §4.2.1); fails as a whole when any of it does not parse.
    pub fn parse(input: &'a [u8]) -> Result<List<'a>, Error> {
        let mut c = Cursor { s: input, i: 0 };
        c.skip_sp();
        while !c.done() {
            c.item_or_inner_list()?;
            if !c.separator()? {
                break;
            }
        }
        c.skip_sp();
        if c.done() { Ok(List { raw: input }) } else { c.fail() }
    }

    /// Every member in order.
    pub fn iter(&self) -> ListIter<'a> {
        ListIter { c: Cursor { s: self.raw, i: 0 } }
    }
}

/// The iterator of [`List::iter`].
#[derive(Debug, Clone)]
pub struct ListIter<'a> {
    c: Cursor<'a>,
}

impl<'a> Iterator for ListIter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        self.c.skip_ows();
        if self.c.peek() == Some(b',') {
            self.c.i += 1;
            self.c.skip_ows();
        }
        if self.c.done() {
            return None;
        }
        self.c.item_or_inner_list().ok()
    }
}

/// Parses `input` as an Item (§4.2 with §4.2.3).
pub fn parse_item(input: &[u8]) -> Result<Item<'_>, Error> {
    let mut c = Cursor { s: input, i: 0 };
    c.skip_sp();
    let item = c.item()?;
    c.skip_sp();
    if c.done() { Ok(item) } else { c.fail() }
}

#[derive(Debug, Clone)]
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    #[inline]
    fn done(&self) -> bool {
        self.i >= self.s.len()
    }
    fn fail<T>(&self) -> R<T> {
        Err(Error::Parse { offset: self.i })
    }
    fn skip_sp(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }
    fn skip_ows(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// After a list or dictionary member: OWS, then either the end (false) or a comma
    /// followed by OWS and more (true); a trailing comma fails.
    fn separator(&mut self) -> R<bool> {
        self.skip_ows();
        if self.done() {
            return Ok(false);
        }
        if self.peek() != Some(b',') {
            return self.fail();
        }
        self.i += 1;
        self.skip_ows();
        if self.done() {
            return self.fail(); // a trailing comma
        }
        Ok(true)
    }

    /// §4.2.2, one member: a key, then `=` and an item or inner list, or parameters
    /// (Boolean true).
    fn dictionary_member(&mut self) -> R<(&'a str, Member<'a>)> {
        let key = self.key()?;
        let value = if self.peek() == Some(b'=') {
            self.i += 1;
            self.item_or_inner_list()?
        } else {
            Member::Item(Item { bare: BareItem::Boolean(true), params: self.parameters()? })
        };
        Ok((key, value))
    }

    /// §4.2.3.3
    fn key(&mut self) -> R<&'a str> {
        let start = self.i;
        match self.peek() {
            Some(b'a'..=b'z' | b'*') => self.i += 1,
            _ => return self.fail(),
        }
        while let Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*') = self.peek() {
            self.i += 1;
        }
        Ok(ascii(&self.s[start..self.i]))
    }

    /// §4.2.1.1: an Item or an Inner List.
    fn item_or_inner_list(&mut self) -> R<Member<'a>> {
        if self.peek() == Some(b'(') {
            self.inner_list().map(Member::InnerList)
        } else {
            self.item().map(Member::Item)
        }
    }

    /// §4.2.1.2
    fn inner_list(&mut self) -> R<InnerList<'a>> {
        self.i += 1; // '('
        let start = self.i;
        while !self.done() {
            self.skip_sp();
            if self.peek() == Some(b')') {
                let items = &self.s[start..self.i];
                self.i += 1;
                return Ok(InnerList { items, params: self.parameters()? });
            }
            self.item()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return self.fail();
            }
        }
        self.fail()
    }

    /// §4.2.3
    fn item(&mut self) -> R<Item<'a>> {
        let bare = self.bare_item()?;
        Ok(Item { bare, params: self.parameters()? })
    }

    /// §4.2.3.1
    fn bare_item(&mut self) -> R<BareItem<'a>> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'"') => self.string().map(BareItem::String),
            Some(b'*' | b'a'..=b'z' | b'A'..=b'Z') => Ok(BareItem::Token(self.token())),
            Some(b':') => self.byte_sequence().map(BareItem::ByteSequence),
            Some(b'?') => self.boolean().map(BareItem::Boolean),
            Some(b'@') => self.date().map(BareItem::Date),
            Some(b'%') => self.display_string().map(BareItem::DisplayString),
            _ => self.fail(),
        }
    }

    /// §4.2.3.2
    fn parameters(&mut self) -> R<Params<'a>> {
        let start = self.i;
        while self.peek() == Some(b';') {
            self.i += 1;
            self.skip_sp();
            self.key()?;
            if self.peek() == Some(b'=') {
                self.i += 1;
                self.bare_item()?;
            }
        }
        Ok(Params { raw: &self.s[start..self.i] })
    }

    /// §4.2.4: an Integer, or a Decimal in thousandths.
    fn number(&mut self) -> R<BareItem<'a>> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.i += 1;
        }
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return self.fail();
        }
        let (mut len, mut dot, mut value, mut fraction) = (0usize, None, 0i64, 0u32);
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {
                    value = value * 10 + i64::from(c - b'0');
                    if dot.is_some() {
                        fraction += 1;
                    }
                }
                b'.' if dot.is_none() => {
                    if len > 12 {
                        return self.fail();
                    }
                    dot = Some(len);
                }
                _ => break,
            }
            self.i += 1;
            len += 1;
            if (dot.is_none() && len > 15) || (dot.is_some() && len > 16) {
                return self.fail();
            }
        }
        let sign = if negative { -1 } else { 1 };
        match dot {
            None => Ok(BareItem::Integer(sign * value)),
            Some(_) if fraction == 0 || fraction > 3 => self.fail(),
            Some(_) => Ok(BareItem::Decimal(Decimal(sign * value * 10i64.pow(3 - fraction)))),
        }
    }

    /// §4.2.5
    fn string(&mut self) -> R<SfString<'a>> {
        self.i += 1; // '"'
        let start = self.i;
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => match self.peek() {
                    Some(b'"' | b'\\') => self.i += 1,
                    _ => return self.fail(),
                },
                b'"' => return Ok(SfString(ascii(&self.s[start..self.i - 1]))),
                0x00..=0x1f | 0x7f..=0xff => return Err(Error::Parse { offset: self.i - 1 }),
                _ => {}
            }
        }
        self.fail()
    }

    /// §4.2.6
    fn token(&mut self) -> &'a str {
        let start = self.i;
        self.i += 1;
        while self.peek().is_some_and(is_tchar) {
            self.i += 1;
        }
        ascii(&self.s[start..self.i])
    }

    /// §4.2.7: base64 between colons; missing `=` padding is synthesised and non-zero pad
    /// bits are accepted (the RFC's SHOULDs), anything else that does not decode fails.
    fn byte_sequence(&mut self) -> R<ByteSequence<'a>> {
        self.i += 1; // ':'
        let start = self.i;
        let Some(len) = self.s[start..].iter().position(|&c| c == b':') else { return self.fail() };
        let b64 = &self.s[start..start + len];
        let data = b64.iter().position(|&c| c == b'=').unwrap_or(b64.len());
        let (body, pad) = b64.split_at(data);
        let ok = body.iter().all(|&c| b64_value(c).is_some())
            && pad.iter().all(|&c| c == b'=')
            && body.len() % 4 != 1
            && (pad.is_empty() || (pad.len() <= 2 && (body.len() + pad.len()) % 4 == 0));
        if !ok {
            return Err(Error::Parse { offset: start });
        }
        self.i = start + len + 1;
        Ok(ByteSequence(b64))
    }

    /// §4.2.8
    fn boolean(&mut self) -> R<bool> {
        self.i += 1; // '?'
        match self.peek() {
            Some(c @ (b'0' | b'1')) => {
                self.i += 1;
                Ok(c == b'1')
            }
            _ => self.fail(),
        }
    }

    /// §4.2.9
    fn date(&mut self) -> R<i64> {
        self.i += 1; // '@'
        match self.number()? {
            BareItem::Integer(i) => Ok(i),
            _ => self.fail(),
        }
    }

    /// §4.2.10: `%"…"` with lower-case `%xx` escapes that decode to valid UTF-8.
    fn display_string(&mut self) -> R<DisplayString<'a>> {
        if self.s.get(self.i + 1) != Some(&b'"') {
            return self.fail();
        }
        self.i += 2;
        let start = self.i;
        // UTF-8 is checked as the octets come, without a buffer: `need` continuation
        // octets are still due, the next within `lo..=hi`.
        let (mut need, mut lo, mut hi) = (0u8, 0x80u8, 0xBFu8);
        while let Some(c) = self.peek() {
            self.i += 1;
            let octet = match c {
                0x00..=0x1f | 0x7f..=0xff => return Err(Error::Parse { offset: self.i - 1 }),
                b'%' => {
                    let hex = |c: Option<&u8>| match c {
                        Some(&c @ b'0'..=b'9') => Some(c - b'0'),
                        Some(&c @ b'a'..=b'f') => Some(c - b'a' + 10),
                        _ => None,
                    };
                    let (Some(h), Some(l)) = (hex(self.s.get(self.i)), hex(self.s.get(self.i + 1))) else {
                        return self.fail();
                    };
                    self.i += 2;
                    (h << 4) | l
                }
                b'"' => {
                    return if need == 0 {
                        Ok(DisplayString(&self.s[start..self.i - 1]))
                    } else {
                        self.fail()
                    };
                }
                c => c,
            };
            if need > 0 {
                if !(lo..=hi).contains(&octet) {
                    return self.fail();
                }
                need -= 1;
                (lo, hi) = (0x80, 0xBF);
                continue;
            }
            (need, lo, hi) = match octet {
                0x00..=0x7F => (0, 0x80, 0xBF),
                0xC2..=0xDF => (1, 0x80, 0xBF),
                0xE0 => (2, 0xA0, 0xBF),
                0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
                0xED => (2, 0x80, 0x9F),
                0xF0 => (3, 0x90, 0xBF),
                0xF1..=0xF3 => (3, 0x80, 0xBF),
                0xF4 => (3, 0x80, 0x8F),
                _ => return self.fail(),
            };
        }
        self.fail()
    }
}

/// RFC 9110 `tchar`, plus `:` and `/` (RFC 9651 §3.3.4).
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
                | b':'
                | b'/'
        )
}

// ---- base64 (RFC 4648 §4, the alphabet RFC 9651 uses) ----

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Decodes checked base64 (padding optional, non-zero pad bits ignored).
fn base64_decode(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in text {
        let Some(v) = b64_value(c) else { break }; // '=': the end
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Appends the canonical (padded) base64 of `data`.
fn base64_encode(out: &mut String, data: &[u8]) {
    out.reserve(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * k)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

// ---- serialization (§4.1) ----

/// Writes an Integer (§4.1.4): at most 15 digits.
pub fn write_integer(out: &mut String, value: i64) -> Result<(), Error> {
    if !(-MAX_INTEGER..=MAX_INTEGER).contains(&value) {
        return Err(Error::Serialize("an integer has at most 15 digits"));
    }
    use fmt::Write;
    let _ = write!(out, "{value}");
    Ok(())
}

/// Writes a Decimal (§4.1.5): its integer part, then one to three fractional digits.
pub fn write_decimal(out: &mut String, value: Decimal) {
    use fmt::Write;
    let v = value.0;
    if v < 0 {
        out.push('-');
    }
    let (int, frac) = (v.unsigned_abs() / 1000, v.unsigned_abs() % 1000);
    let _ = write!(out, "{int}.");
    match frac {
        f if f % 100 == 0 => {
            let _ = write!(out, "{}", f / 100);
        }
        f if f % 10 == 0 => {
            let _ = write!(out, "{:02}", f / 10);
        }
        f => {
            let _ = write!(out, "{f:03}");
        }
    }
}

/// Writes a String (§4.1.6): printable ASCII only, `"` and `\` escaped.
pub fn write_string(out: &mut String, value: &str) -> Result<(), Error> {
    if !value.bytes().all(|c| (0x20..=0x7e).contains(&c)) {
        return Err(Error::Serialize("a string holds printable ASCII only"));
    }
    out.reserve(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(())
}

/// Writes a Token (§4.1.7).
pub fn write_token(out: &mut String, value: &str) -> Result<(), Error> {
    let b = value.as_bytes();
    let first = b.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'*');
    if !first || !b.iter().all(|&c| is_tchar(c)) {
        return Err(Error::Serialize("not a token"));
    }
    out.push_str(value);
    Ok(())
}

/// Writes a Key (§4.1.1.3).
pub fn write_key(out: &mut String, key: &str) -> Result<(), Error> {
    let b = key.as_bytes();
    let first = b.first().is_some_and(|c| c.is_ascii_lowercase() || *c == b'*');
    let rest = b.iter().all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*'));
    if !first || !rest {
        return Err(Error::Serialize("not a key"));
    }
    out.push_str(key);
    Ok(())
}

/// Writes a Byte Sequence (§4.1.8): base64 with padding, between colons.
pub fn write_byte_sequence(out: &mut String, value: &[u8]) {
    out.push(':');
    base64_encode(out, value);
    out.push(':');
}

/// Writes a Boolean (§4.1.9).
pub fn write_boolean(out: &mut String, value: bool) {
    out.push_str(if value { "?1" } else { "?0" });
}

/// Writes a Date (§4.1.10).
pub fn write_date(out: &mut String, value: i64) -> Result<(), Error> {
    out.push('@');
    write_integer(out, value)
}

/// Writes a Display String (§4.1.11): non-ASCII, `%` and `"` as lower-case `%xx`.
pub fn write_display_string(out: &mut String, value: &str) {
    use fmt::Write;
    out.push_str("%\"");
    for &b in value.as_bytes() {
        if b == b'%' || b == b'"' || !(0x20..=0x7e).contains(&b) {
            let _ = write!(out, "%{b:02x}");
        } else {
            out.push(char::from(b));
        }
    }
    out.push('"');
}

/// Writes a parsed bare item in canonical form.
pub fn write_bare_item(out: &mut String, value: &BareItem<'_>) {
    match value {
        // Parsed integers and dates are within range.
        BareItem::Integer(i) => {
            let _ = write_integer(out, *i);
        }
        BareItem::Date(d) => {
            let _ = write_date(out, *d);
        }
        BareItem::Decimal(d) => write_decimal(out, *d),
        // The escapes a parsed string holds are the only ones allowed: canonical as is.
        BareItem::String(s) => {
            out.push('"');
            out.push_str(s.0);
            out.push('"');
        }
        BareItem::Token(t) => out.push_str(t),
        BareItem::ByteSequence(b) => write_byte_sequence(out, &b.decode()),
        BareItem::Boolean(b) => write_boolean(out, *b),
        BareItem::DisplayString(d) => write_display_string(out, &d.value()),
    }
}

/// Writes parsed parameters in canonical form: each key once, at its first place, with its
/// last value; `Boolean(true)` as the key alone.
pub fn write_params(out: &mut String, params: &Params<'_>) {
    if params.is_empty() {
        return;
    }
    for (key, value) in dedup(params.iter()) {
        out.push(';');
        out.push_str(key);
        if value != BareItem::Boolean(true) {
            out.push('=');
            write_bare_item(out, &value);
        }
    }
}

/// Writes a parsed item in canonical form.
pub fn write_item(out: &mut String, item: &Item<'_>) {
    write_bare_item(out, &item.bare);
    write_params(out, &item.params);
}

/// Writes a parsed inner list in canonical form.
pub fn write_inner_list(out: &mut String, list: &InnerList<'_>) {
    out.push('(');
    for (n, item) in list.iter().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        write_item(out, &item);
    }
    out.push(')');
    write_params(out, &list.params);
}

/// Writes a parsed list member or dictionary value in canonical form.
pub fn write_member(out: &mut String, member: &Member<'_>) {
    match member {
        Member::Item(i) => write_item(out, i),
        Member::InnerList(l) => write_inner_list(out, l),
    }
}

/// Writes a parsed dictionary in canonical form (each key once, at its first place, with
/// its last value; a `Boolean(true)` item as its key and parameters).
pub fn write_dictionary(out: &mut String, dict: &Dictionary<'_>) {
    for (n, (key, member)) in dedup(dict.iter()).into_iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
        match member {
            Member::Item(Item { bare: BareItem::Boolean(true), params }) => write_params(out, &params),
            m => {
                out.push('=');
                write_member(out, &m);
            }
        }
    }
}

/// Writes a parsed list in canonical form.
pub fn write_list(out: &mut String, list: &List<'_>) {
    for (n, member) in list.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        write_member(out, &member);
    }
}

/// Each key once, at its first place, with its last value. Linear time: a few keys (the
/// usual parameters) are compared directly, more go through a hash index.
fn dedup<'a, V>(entries: impl Iterator<Item = (&'a str, V)>) -> Vec<(&'a str, V)> {
    const DIRECT: usize = 16;
    let mut out: Vec<(&'a str, V)> = Vec::new();
    let mut index: Option<foldhash::HashMap<&'a str, usize>> = None;
    for (key, value) in entries {
        if index.is_none() && out.len() >= DIRECT {
            index = Some(out.iter().enumerate().map(|(n, (k, _))| (*k, n)).collect());
        }
        let at = match &index {
            Some(index) => index.get(key).copied(),
            None => out.iter().position(|(k, _)| *k == key),
        };
        match at {
            Some(at) => out[at].1 = value,
            None => {
                if let Some(index) = &mut index {
                    index.insert(key, out.len());
                }
                out.push((key, value));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
