//! A validating parser for RFC 9651 Structured Field Dictionaries, restricted to what the
//! AI-preference vocabulary needs: it checks the whole value against the RFC's parsing
//! algorithms (§4.2) and reports, for each member, its key and whether its value is a bare
//! Token (and which). Nothing is allocated; the time is linear in the input.
//!
//! Everything RFC 9651 defines is parsed so that a value that does not parse fails as a
//! whole (the vocabulary says a failed parse makes every category unknown): Integers and
//! Decimals (digit limits), Strings (escapes), Tokens, Byte Sequences (base64, padding
//! synthesised and non-zero pad bits accepted, as §4.2.7 recommends), Booleans, Dates,
//! Display Strings (lower-case `%xx` escapes of valid UTF-8), Inner Lists and Parameters.

/// Why a value did not parse (for tests and diagnostics; the position is a byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SfError(pub usize);

/// What a member's value is, as far as the vocabulary cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Member<'a> {
    /// A bare Token (its parameters, if any, skipped).
    Token(&'a [u8]),
    /// Anything else: an Inner List, a Boolean (a key without `=`), a String, a number...
    Other,
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

type R<T> = Result<T, SfError>;

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
        Err(SfError(self.i))
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

    /// §4.2.3.3
    fn key(&mut self) -> R<&'a [u8]> {
        let start = self.i;
        match self.peek() {
            Some(b'a'..=b'z' | b'*') => self.i += 1,
            _ => return self.fail(),
        }
        while let Some(b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*') = self.peek() {
            self.i += 1;
        }
        Ok(&self.s[start..self.i])
    }

    /// §4.2.1.1: an Item or an Inner List.
    fn item_or_inner_list(&mut self) -> R<Member<'a>> {
        if self.peek() == Some(b'(') {
            self.inner_list()?;
            Ok(Member::Other)
        } else {
            self.item()
        }
    }

    /// §4.2.1.2
    fn inner_list(&mut self) -> R<()> {
        self.i += 1; // '('
        while !self.done() {
            self.skip_sp();
            if self.peek() == Some(b')') {
                self.i += 1;
                return self.parameters();
            }
            self.item()?;
            if !matches!(self.peek(), Some(b' ' | b')')) {
                return self.fail();
            }
        }
        self.fail()
    }

    /// §4.2.3
    fn item(&mut self) -> R<Member<'a>> {
        let bare = self.bare_item()?;
        self.parameters()?;
        Ok(bare)
    }

    /// §4.2.3.1
    fn bare_item(&mut self) -> R<Member<'a>> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => self.number().map(|_| Member::Other),
            Some(b'"') => self.string().map(|_| Member::Other),
            Some(b'*' | b'a'..=b'z' | b'A'..=b'Z') => Ok(Member::Token(self.token())),
            Some(b':') => self.byte_sequence().map(|_| Member::Other),
            Some(b'?') => self.boolean().map(|_| Member::Other),
            Some(b'@') => self.date().map(|_| Member::Other),
            Some(b'%') => self.display_string().map(|_| Member::Other),
            _ => self.fail(),
        }
    }

    /// §4.2.3.2
    fn parameters(&mut self) -> R<()> {
        while self.peek() == Some(b';') {
            self.i += 1;
            self.skip_sp();
            self.key()?;
            if self.peek() == Some(b'=') {
                self.i += 1;
                self.bare_item()?;
            }
        }
        Ok(())
    }

    /// §4.2.4: returns whether it was an Integer (not a Decimal).
    fn number(&mut self) -> R<bool> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return self.fail();
        }
        let (mut len, mut dot) = (0usize, None);
        while let Some(c) = self.peek() {
            match c {
                b'0'..=b'9' => {}
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
        match dot {
            None => Ok(true),
            Some(d) => {
                let fraction = len - d - 1;
                if fraction == 0 || fraction > 3 { self.fail() } else { Ok(false) }
            }
        }
    }

    /// §4.2.5
    fn string(&mut self) -> R<()> {
        self.i += 1; // '"'
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => match self.peek() {
                    Some(b'"' | b'\\') => self.i += 1,
                    _ => return self.fail(),
                },
                b'"' => return Ok(()),
                0x00..=0x1f | 0x7f..=0xff => return Err(SfError(self.i - 1)),
                _ => {}
            }
        }
        self.fail()
    }

    /// §4.2.6
    fn token(&mut self) -> &'a [u8] {
        let start = self.i;
        self.i += 1;
        while let Some(c) = self.peek() {
            let tchar = c.is_ascii_alphanumeric()
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
                );
            if !tchar {
                break;
            }
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// §4.2.7: base64 between colons; missing `=` padding is synthesised and non-zero pad
    /// bits are accepted (the RFC's SHOULDs), anything else that does not decode fails.
    fn byte_sequence(&mut self) -> R<()> {
        self.i += 1; // ':'
        let start = self.i;
        let Some(len) = self.s[start..].iter().position(|&c| c == b':') else { return self.fail() };
        let b64 = &self.s[start..start + len];
        let data = b64.iter().position(|&c| c == b'=').unwrap_or(b64.len());
        let (body, pad) = b64.split_at(data);
        let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
        let ok = body.iter().all(alphabet)
            && pad.iter().all(|&c| c == b'=')
            && body.len() % 4 != 1
            && (pad.is_empty() || (pad.len() <= 2 && (body.len() + pad.len()) % 4 == 0));
        if !ok {
            return Err(SfError(start));
        }
        self.i = start + len + 1;
        Ok(())
    }

    /// §4.2.8
    fn boolean(&mut self) -> R<()> {
        self.i += 1; // '?'
        match self.peek() {
            Some(b'0' | b'1') => {
                self.i += 1;
                Ok(())
            }
            _ => self.fail(),
        }
    }

    /// §4.2.9
    fn date(&mut self) -> R<()> {
        self.i += 1; // '@'
        if self.number()? { Ok(()) } else { self.fail() }
    }

    /// §4.2.10: `%"…"` with lower-case `%xx` escapes that decode to valid UTF-8.
    fn display_string(&mut self) -> R<()> {
        if self.s.get(self.i + 1) != Some(&b'"') {
            return self.fail();
        }
        self.i += 2;
        // UTF-8 is checked as the octets come, without a buffer: `need` continuation
        // octets are still due, the next within `lo..=hi`.
        let (mut need, mut lo, mut hi) = (0u8, 0x80u8, 0xBFu8);
        while let Some(c) = self.peek() {
            self.i += 1;
            let octet = match c {
                0x00..=0x1f | 0x7f..=0xff => return Err(SfError(self.i - 1)),
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
                b'"' => return if need == 0 { Ok(()) } else { self.fail() },
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

/// Parses `input` as a Dictionary (RFC 9651 §4.2 with §4.2.2), calling `member(key,
/// value)` for each member in order (a duplicate key comes again: the caller keeps the
/// last, as §4.2.2 overwrites). On failure some members may have been reported already;
/// the caller must drop what it got.
pub(crate) fn parse_dictionary<'a>(input: &'a [u8], mut member: impl FnMut(&'a [u8], Member<'a>)) -> R<()> {
    let mut c = Cursor { s: input, i: 0 };
    c.skip_sp();
    while !c.done() {
        let key = c.key()?;
        let value = if c.peek() == Some(b'=') {
            c.i += 1;
            c.item_or_inner_list()?
        } else {
            c.parameters()?;
            Member::Other // Boolean true
        };
        member(key, value);
        c.skip_ows();
        if c.done() {
            break;
        }
        if c.peek() != Some(b',') {
            return c.fail();
        }
        c.i += 1;
        c.skip_ows();
        if c.done() {
            return c.fail(); // a trailing comma
        }
    }
    c.skip_sp();
    if c.done() { Ok(()) } else { c.fail() }
}

/// Parses `input` as a List (§4.2.1) or an Item (§4.2.3); for the RFC's test vectors.
#[cfg(test)]
pub(crate) fn parse_other(input: &[u8], list: bool) -> R<Vec<Member<'_>>> {
    let mut c = Cursor { s: input, i: 0 };
    c.skip_sp();
    let mut out = Vec::new();
    if list {
        while !c.done() {
            out.push(c.item_or_inner_list()?);
            c.skip_ows();
            if c.done() {
                break;
            }
            if c.peek() != Some(b',') {
                return c.fail();
            }
            c.i += 1;
            c.skip_ows();
            if c.done() {
                return c.fail();
            }
        }
    } else {
        out.push(c.item()?);
    }
    c.skip_sp();
    if c.done() { Ok(out) } else { c.fail() }
}
