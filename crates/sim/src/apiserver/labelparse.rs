//! Label selectors parsed as apimachinery's `labels.Parse` parses them (pkg/labels/selector.go: its lexer,
//! recursive-descent parser and `NewRequirement` checks), so that a malformed selector is refused with
//! kube-apiserver's message (400 BadRequest).

use super::errors::quote;

/// A parsed requirement's operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    In,
    NotIn,
    Equals,
    NotEquals,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    End,
    Equals,
    Greater,
    Ident,
    In,
    Less,
    NotEquals,
    NotIn,
    OpenPar,
    Error,
}

fn literal_token(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosedPar,
        "," => Tok::Comma,
        "!" => Tok::DoesNotExist,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::Greater,
        "in" => Tok::In,
        "<" => Tok::Less,
        "!=" => Tok::NotEquals,
        "notin" => Tok::NotIn,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// `Lexer.Lex` over the whole input (the parser scans everything first).
fn lex(s: &str) -> Vec<(Tok, String)> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < b.len() && is_space(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Tok::End, String::new()));
            return out;
        }
        let start = pos;
        if is_special(b[pos]) {
            let mut last: Option<(Tok, usize)> = None;
            while pos < b.len() && is_special(b[pos]) {
                pos += 1;
                match literal_token(&s[start..pos]) {
                    Some(t) => last = Some((t, pos)),
                    None if last.is_some() => {
                        pos -= 1;
                        break;
                    }
                    None => {}
                }
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, s[start..end].to_string()));
                }
                None => out.push((
                    Tok::Error,
                    format!("error expected: keyword found '{}'", &s[start..pos]),
                )),
            }
        } else {
            while pos < b.len() && !is_special(b[pos]) && !is_space(b[pos]) {
                pos += 1;
            }
            let word = &s[start..pos];
            out.push((literal_token(word).unwrap_or(Tok::Ident), word.to_string()));
        }
    }
}

struct Parser {
    items: Vec<(Tok, String)>,
    pos: usize,
}

/// In a value context, `in` and `notin` are identifiers.
fn as_value(t: Tok) -> Tok {
    match t {
        Tok::In | Tok::NotIn => Tok::Ident,
        other => other,
    }
}

impl Parser {
    fn lookahead(&self, values: bool) -> (Tok, String) {
        let (t, l) = self.items[self.pos.min(self.items.len() - 1)].clone();
        (if values { as_value(t) } else { t }, l)
    }

    fn consume(&mut self, values: bool) -> (Tok, String) {
        let r = self.lookahead(values);
        self.pos = (self.pos + 1).min(self.items.len());
        r
    }
}

/// `labels.Parse`: the requirements (key, operator, values), sorted by key, or kube-apiserver's message.
pub(super) fn parse(selector: &str) -> Result<Vec<(String, Op, Vec<String>)>, String> {
    let mut p = Parser {
        items: lex(selector),
        pos: 0,
    };
    let mut reqs = Vec::new();
    loop {
        let (t, lit) = p.lookahead(true);
        match t {
            Tok::Ident | Tok::DoesNotExist => {
                let r = requirement(&mut p).map_err(|e| format!("unable to parse requirement: {e}"))?;
                reqs.push(r);
                let (t, lit) = p.consume(true);
                match t {
                    Tok::End => break,
                    Tok::Comma => {
                        let (t2, l2) = p.lookahead(true);
                        if t2 != Tok::Ident && t2 != Tok::DoesNotExist {
                            return Err(format!("found '{l2}', expected: identifier after ','"));
                        }
                    }
                    _ => return Err(format!("found '{lit}', expected: ',' or 'end of string'")),
                }
            }
            Tok::End => break,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: !, identifier, or 'end of string'"
                ));
            }
        }
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs)
}

fn requirement(p: &mut Parser) -> Result<(String, Op, Vec<String>), String> {
    let (key, inferred) = key_and_inferred(p)?;
    if let Some(op) = inferred {
        return Ok((key, op, Vec::new()));
    }
    let (t, lit) = p.consume(false);
    let op = match t {
        Tok::In => Op::In,
        Tok::Equals | Tok::DoubleEquals => Op::Equals,
        Tok::Greater => Op::Gt,
        Tok::Less => Op::Lt,
        Tok::NotIn => Op::NotIn,
        Tok::NotEquals => Op::NotEquals,
        _ => return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt")),
    };
    let values = match op {
        Op::In | Op::NotIn => set_values(p)?,
        _ => exact_value(p)?,
    };
    check_values(&key, op, &values)?;
    Ok((key, op, values))
}

/// `parseKeyAndInferOperator`: the key, and `Exists`/`DoesNotExist` when no binary operator follows.
fn key_and_inferred(p: &mut Parser) -> Result<(String, Option<Op>), String> {
    let (mut t, mut lit) = p.consume(true);
    let not = t == Tok::DoesNotExist;
    if not {
        (t, lit) = p.consume(true);
    }
    if t != Tok::Ident {
        return Err(format!("found '{lit}', expected: identifier"));
    }
    let errs = super::metadata_validation::label_key(&lit);
    if !errs.is_empty() {
        return Err(format!(
            "<nil>: Invalid value: {}: {}",
            quote(&lit),
            errs.join("; ")
        ));
    }
    let (next, _) = p.lookahead(true);
    let inferred = if not {
        Some(Op::DoesNotExist)
    } else if matches!(next, Tok::End | Tok::Comma) {
        Some(Op::Exists)
    } else {
        None
    };
    Ok((lit, inferred))
}

/// `parseValues`: `(a,b,c)`, sorted and de-duplicated as a `sets.String`.
fn set_values(p: &mut Parser) -> Result<Vec<String>, String> {
    let (t, lit) = p.consume(true);
    if t != Tok::OpenPar {
        return Err(format!("found '{lit}' expected: '('"));
    }
    let (t, lit) = p.lookahead(true);
    let mut set = std::collections::BTreeSet::new();
    match t {
        Tok::Ident | Tok::Comma => {
            identifiers(p, &mut set)?;
            if p.consume(true).0 != Tok::ClosedPar {
                return Err(format!("found '{lit}', expected: ')'"));
            }
        }
        Tok::ClosedPar => {
            p.consume(true);
            set.insert(String::new());
        }
        _ => return Err(format!("found '{lit}', expected: ',', ')' or identifier")),
    }
    Ok(set.into_iter().collect())
}

/// `parseIdentifiersList`.
fn identifiers(p: &mut Parser, set: &mut std::collections::BTreeSet<String>) -> Result<(), String> {
    loop {
        let (t, lit) = p.consume(true);
        match t {
            Tok::Ident => {
                set.insert(lit);
                let (t2, l2) = p.lookahead(true);
                match t2 {
                    Tok::Comma => continue,
                    Tok::ClosedPar => return Ok(()),
                    _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                }
            }
            Tok::Comma => {
                if set.is_empty() {
                    set.insert(String::new());
                }
                match p.lookahead(true).0 {
                    Tok::ClosedPar => {
                        set.insert(String::new());
                        return Ok(());
                    }
                    Tok::Comma => {
                        set.insert(String::new());
                    }
                    _ => {}
                }
            }
            _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
        }
    }
}

/// `parseExactValue`.
fn exact_value(p: &mut Parser) -> Result<Vec<String>, String> {
    let (t, _) = p.lookahead(true);
    if matches!(t, Tok::End | Tok::Comma) {
        return Ok(vec![String::new()]);
    }
    let (t, lit) = p.consume(true);
    if t == Tok::Ident {
        return Ok(vec![lit]);
    }
    Err(format!("found '{lit}', expected: identifier"))
}

/// `NewRequirement`'s value checks, aggregated as `ErrorList.ToAggregate` renders them.
fn check_values(key: &str, op: Op, values: &[String]) -> Result<(), String> {
    let mut errs = Vec::new();
    if matches!(op, Op::Gt | Op::Lt) {
        for (i, v) in values.iter().enumerate() {
            if v.parse::<i64>().is_err() {
                errs.push(format!(
                    "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                    quote(v)
                ));
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        let path = format!("values[{i}][{key}]");
        if v.len() > 63 {
            errs.push(format!(
                "{path}: Invalid value: {}: must be no more than 63 bytes",
                quote(v)
            ));
        }
        if !v.is_empty() && !super::metadata_validation::label_value_ok(v) {
            errs.push(format!(
                "{path}: Invalid value: {}: {}",
                quote(v),
                super::metadata_validation::LABEL_VALUE_MSG
            ));
        }
    }
    match errs.as_slice() {
        [] => Ok(()),
        [one] => Err(one.clone()),
        many => Err(format!("[{}]", many.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages kube-apiserver v1.37.2 gave for these selectors.
    #[test]
    fn refuses_as_kube() {
        for (sel, want) in [
            ("a=b=c", "found '=', expected: ',' or 'end of string'"),
            ("a,,b", "found ',', expected: identifier after ','"),
            (
                "key in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'",
            ),
        ] {
            assert_eq!(parse(sel).err().as_deref(), Some(want), "{sel}");
        }
        let bad_key = parse("a%3Db").err().unwrap_or_default();
        assert!(
            bad_key.starts_with(
                "unable to parse requirement: <nil>: Invalid value: \"a%3Db\": name part must consist of"
            ),
            "{bad_key}"
        );
    }

    #[test]
    fn parses_what_kube_parses() {
        let r = parse("x in (foo,,baz),y,!z, w notin (), v>3, in in (in)").unwrap_or_default();
        let keys: Vec<(&str, Op)> = r.iter().map(|(k, o, _)| (k.as_str(), *o)).collect();
        assert_eq!(
            keys,
            vec![
                ("in", Op::In),
                ("v", Op::Gt),
                ("w", Op::NotIn),
                ("x", Op::In),
                ("y", Op::Exists),
                ("z", Op::DoesNotExist)
            ]
        );
        assert_eq!(r[3].2, vec!["", "baz", "foo"]);
        assert_eq!(
            parse("a==b").map(|r| r[0].2.clone()).ok(),
            Some(vec!["b".to_string()])
        );
        assert_eq!(
            parse("a=").map(|r| r[0].2.clone()).ok(),
            Some(vec![String::new()])
        );
        assert!(parse("a>x").is_err());
        assert!(parse("").is_ok_and(|r| r.is_empty()));
    }
}
