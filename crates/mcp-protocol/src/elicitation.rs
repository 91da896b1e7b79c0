//! Form-mode elicitation for a host that asks a person: the `requestedSchema` read into
//! bounded fields, and what the person types checked against its field and turned into the
//! value sent back. Pure: the host does the asking.
//!
//! The schema is the specification's restricted subset: a flat object of strings (with
//! `format` `email`, `uri`, `date`, `date-time` and length bounds), numbers and integers (with
//! bounds), booleans, single-select enums (`enum`, `oneOf` of `const`/`title`, the legacy
//! `enumNames`) and multi-select ones (`type: array` with `items.enum` or `items.anyOf`,
//! `minItems`/`maxItems`), each with an optional default.

use serde_json::{Map, Number, Value};

/// At most this many fields in one form: a server cannot make a person answer more.
pub const MAX_FIELDS: usize = 32;
/// At most this many options in one enum.
pub const MAX_OPTIONS: usize = 100;
/// Longest property name or option value, in characters (they are sent back as they are).
pub const MAX_NAME_CHARS: usize = 200;
/// Titles, descriptions and option labels are cut to this many characters.
pub const MAX_LABEL_CHARS: usize = 500;

/// A requested schema that cannot be shown as a form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormError {
    /// The schema is not `{"type": "object", "properties": {...}}`.
    #[error("the requested schema is not an object with properties")]
    NotAnObject,
    /// More fields than [`MAX_FIELDS`].
    #[error("the form has {count} fields; at most {MAX_FIELDS} are shown")]
    TooManyFields {
        /// How many the schema has.
        count: usize,
    },
    /// A field of a kind the restricted schema does not have (nested objects, say).
    #[error("field {name:?} cannot be asked: {reason}")]
    Unsupported {
        /// The property's name (cut).
        name: String,
        /// Why.
        reason: String,
    },
}

/// One form: its fields in the schema's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Form {
    /// The fields.
    pub fields: Vec<Field>,
}

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property name (the key of the answer).
    pub name: String,
    /// Its title, raw server text (cut to [`MAX_LABEL_CHARS`]).
    pub title: Option<String>,
    /// Its description, raw server text (cut).
    pub description: Option<String>,
    /// Whether the schema lists it in `required`.
    pub required: bool,
    /// What it takes.
    pub kind: FieldKind,
    /// The default, when the schema has one that fits the field.
    pub default: Option<Value>,
}

/// What a field takes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum FieldKind {
    /// A string, maybe of a format, within length bounds.
    Text {
        /// `email`, `uri`, `date` or `date-time`.
        format: Option<TextFormat>,
        /// `minLength`.
        min_length: Option<u64>,
        /// `maxLength`.
        max_length: Option<u64>,
    },
    /// A number (`integer`: a whole one) within bounds.
    Number {
        /// `type: integer`.
        integer: bool,
        /// `minimum`.
        minimum: Option<f64>,
        /// `maximum`.
        maximum: Option<f64>,
    },
    /// Yes or no.
    Boolean,
    /// One of the options.
    Choice {
        /// The options.
        options: Vec<Choice>,
    },
    /// Any number of the options, within bounds.
    Choices {
        /// The options.
        options: Vec<Choice>,
        /// `minItems`.
        min_items: Option<u64>,
        /// `maxItems`.
        max_items: Option<u64>,
    },
}

/// A string format the restricted schema allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TextFormat {
    /// `name@domain`.
    Email,
    /// An absolute URI (`scheme:rest`).
    Uri,
    /// `YYYY-MM-DD`.
    Date,
    /// RFC 3339: `YYYY-MM-DDTHH:MM:SS` with an offset (`Z`, `+02:00`).
    DateTime,
}

impl TextFormat {
    /// Its name in the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Uri => "uri",
            Self::Date => "date",
            Self::DateTime => "date-time",
        }
    }
}

/// One option of an enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The value sent back.
    pub value: String,
    /// Its display title, raw server text (cut), if the schema gives one.
    pub label: Option<String>,
}

/// The answer to "leave this optional field out" ([`Field::read`]).
pub const LEAVE_OUT: &str = "-";

fn text_of(value: Option<&Value>) -> Option<String> {
    value.and_then(Value::as_str).map(|s| mcp_safety::text::cut(s, MAX_LABEL_CHARS))
}

fn bound(property: &Map<String, Value>, key: &str) -> Option<u64> {
    property.get(key).and_then(Value::as_u64)
}

fn cut_name(name: &str) -> String {
    mcp_safety::text::cut(name, MAX_NAME_CHARS)
}

impl Form {
    /// Reads a `requestedSchema`. Fields the restricted schema does not have, too many fields
    /// or options, and names or values too long are refused; titles and descriptions are cut.
    /// A default that does not fit its field is ignored.
    pub fn parse(schema: &Value) -> Result<Self, FormError> {
        let properties = schema.get("properties").and_then(Value::as_object).ok_or(FormError::NotAnObject)?;
        if schema.get("type").is_some_and(|t| t != "object") {
            return Err(FormError::NotAnObject);
        }
        if properties.len() > MAX_FIELDS {
            return Err(FormError::TooManyFields { count: properties.len() });
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let fields = properties
            .iter()
            .map(|(name, property)| Field::parse(name, property, required.contains(&name.as_str())))
            .collect::<Result<_, _>>()?;
        Ok(Self { fields })
    }

    /// The defaults of every field that has one: what accepting without changing anything sends.
    pub fn defaults(&self) -> Map<String, Value> {
        self.fields.iter().filter_map(|f| Some((f.name.clone(), f.default.clone()?))).collect()
    }

    /// Checks a whole answer (from a script, say): every required field present, every value
    /// fitting its field, no field the form does not have. The error names the field.
    pub fn check(&self, content: &Map<String, Value>) -> Result<(), String> {
        if let Some(unknown) = content.keys().find(|k| !self.fields.iter().any(|f| &f.name == *k)) {
            return Err(format!("the form has no field {:?}", cut_name(unknown)));
        }
        for field in &self.fields {
            match content.get(&field.name) {
                Some(value) => field.check(value).map_err(|e| format!("{}: {e}", field.name))?,
                None if field.required => return Err(format!("{}: a value is required", field.name)),
                None => {}
            }
        }
        Ok(())
    }
}

impl Field {
    fn parse(name: &str, property: &Value, required: bool) -> Result<Self, FormError> {
        let unsupported = |reason: &str| FormError::Unsupported { name: cut_name(name), reason: reason.to_owned() };
        if name.chars().count() > MAX_NAME_CHARS {
            return Err(unsupported("its name is too long"));
        }
        let property = property.as_object().ok_or_else(|| unsupported("its schema is not an object"))?;
        let kind = match property.get("type").and_then(Value::as_str) {
            Some("string") => match choices_of(property, name)? {
                Some(options) => FieldKind::Choice { options },
                None => {
                    let format = match property.get("format").and_then(Value::as_str) {
                        None => None,
                        Some("email") => Some(TextFormat::Email),
                        Some("uri") => Some(TextFormat::Uri),
                        Some("date") => Some(TextFormat::Date),
                        Some("date-time") => Some(TextFormat::DateTime),
                        Some(_) => return Err(unsupported("its format is not email, uri, date or date-time")),
                    };
                    FieldKind::Text {
                        format,
                        min_length: bound(property, "minLength"),
                        max_length: bound(property, "maxLength"),
                    }
                }
            },
            Some(kind @ ("number" | "integer")) => FieldKind::Number {
                integer: kind == "integer",
                minimum: property.get("minimum").and_then(Value::as_f64),
                maximum: property.get("maximum").and_then(Value::as_f64),
            },
            Some("boolean") => FieldKind::Boolean,
            Some("array") => {
                let items = property.get("items").and_then(Value::as_object).ok_or_else(|| unsupported("no items"))?;
                let options =
                    choices_of(items, name)?.ok_or_else(|| unsupported("its items are not an enum of strings"))?;
                FieldKind::Choices {
                    options,
                    min_items: bound(property, "minItems"),
                    max_items: bound(property, "maxItems"),
                }
            }
            _ => return Err(unsupported("its type is not string, number, integer, boolean or array")),
        };
        let mut field = Self {
            name: name.to_owned(),
            title: text_of(property.get("title")),
            description: text_of(property.get("description")),
            required,
            kind,
            default: None,
        };
        field.default = property.get("default").filter(|d| field.check(d).is_ok()).cloned();
        Ok(field)
    }

    /// The field's title, else its name.
    pub fn label(&self) -> &str {
        self.title.as_deref().filter(|t| !t.trim().is_empty()).unwrap_or(&self.name)
    }

    /// What a person typed, checked and turned into the value to send: `Ok(None)` leaves the
    /// field out. An empty answer takes the default (or leaves an optional field out);
    /// [`LEAVE_OUT`] leaves an optional field out even when it has a default. The error says
    /// what was wrong, for asking again.
    pub fn read(&self, typed: &str) -> Result<Option<Value>, String> {
        let typed = typed.trim();
        if typed.is_empty() || (typed == LEAVE_OUT && !self.required) {
            return match (&self.default, self.required) {
                (Some(default), _) if typed.is_empty() => Ok(Some(default.clone())),
                (_, true) => Err("a value is required".to_owned()),
                _ => Ok(None),
            };
        }
        let value = match &self.kind {
            FieldKind::Text { .. } => Value::String(typed.to_owned()),
            FieldKind::Number { integer, .. } => {
                let n: f64 = typed.parse().map_err(|_| format!("{typed:?} is not a number"))?;
                if !n.is_finite() {
                    return Err(format!("{typed:?} is not a finite number"));
                }
                if *integer {
                    let whole = typed.parse::<i64>().map_err(|_| format!("{typed:?} is not a whole number"))?;
                    Value::from(whole)
                } else {
                    Number::from_f64(n).map(Value::Number).ok_or_else(|| format!("{typed:?} is not a number"))?
                }
            }
            FieldKind::Boolean => match typed.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => Value::Bool(true),
                "n" | "no" | "false" | "0" => Value::Bool(false),
                _ => return Err(format!("{typed:?} is not yes or no")),
            },
            FieldKind::Choice { options } => Value::String(pick(options, typed)?.to_owned()),
            FieldKind::Choices { options, .. } => {
                let mut chosen: Vec<Value> = Vec::new();
                for part in typed.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let value = Value::String(pick(options, part)?.to_owned());
                    if !chosen.contains(&value) {
                        chosen.push(value);
                    }
                }
                Value::Array(chosen)
            }
        };
        self.check(&value)?;
        Ok(Some(value))
    }

    /// Whether `value` fits the field; the error says why not.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match &self.kind {
            FieldKind::Text { format, min_length, max_length } => {
                let text = value.as_str().ok_or("expected a string")?;
                let length = text.chars().count() as u64;
                if let Some(min) = min_length.filter(|m| length < *m) {
                    return Err(format!("at least {min} characters, not {length}"));
                }
                if let Some(max) = max_length.filter(|m| length > *m) {
                    return Err(format!("at most {max} characters, not {length}"));
                }
                match format {
                    Some(TextFormat::Email) if !is_email(text) => Err("not an email address (name@example.com)".into()),
                    Some(TextFormat::Uri) if !is_uri(text) => Err("not an absolute URI (https://example.com/)".into()),
                    Some(TextFormat::Date) if !is_date(text) => Err("not a date (YYYY-MM-DD)".into()),
                    Some(TextFormat::DateTime) if !is_date_time(text) => {
                        Err("not a date and time (YYYY-MM-DDTHH:MM:SSZ, or with an offset like +02:00)".into())
                    }
                    _ => Ok(()),
                }
            }
            FieldKind::Number { integer, minimum, maximum } => {
                let n = value.as_f64().ok_or("expected a number")?;
                if *integer && !(value.is_i64() || value.is_u64()) {
                    return Err("expected a whole number".to_owned());
                }
                if let Some(min) = minimum.filter(|m| n < *m) {
                    return Err(format!("at least {min}"));
                }
                if let Some(max) = maximum.filter(|m| n > *m) {
                    return Err(format!("at most {max}"));
                }
                Ok(())
            }
            FieldKind::Boolean => value.as_bool().map(drop).ok_or_else(|| "expected yes or no".to_owned()),
            FieldKind::Choice { options } => {
                let text = value.as_str().ok_or("expected a string")?;
                if options.iter().any(|o| o.value == text) { Ok(()) } else { Err("not one of the options".into()) }
            }
            FieldKind::Choices { options, min_items, max_items } => {
                let items = value.as_array().ok_or("expected a list")?;
                if !items.iter().all(|i| i.as_str().is_some_and(|s| options.iter().any(|o| o.value == s))) {
                    return Err("not all of them are options".to_owned());
                }
                let count = items.len() as u64;
                if let Some(min) = min_items.filter(|m| count < *m) {
                    return Err(format!("choose at least {min}"));
                }
                if let Some(max) = max_items.filter(|m| count > *m) {
                    return Err(format!("choose at most {max}"));
                }
                Ok(())
            }
        }
    }
}

/// The options of an enum schema (`enum` with an optional legacy `enumNames`, `oneOf` or
/// `anyOf` of `const`/`title`), `None` when it is not one.
fn choices_of(schema: &Map<String, Value>, name: &str) -> Result<Option<Vec<Choice>>, FormError> {
    let unsupported = |reason: &str| FormError::Unsupported { name: cut_name(name), reason: reason.to_owned() };
    let options: Vec<Choice> = if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let value = v.as_str().ok_or_else(|| unsupported("an enum value is not a string"))?;
                Ok(Choice { value: value.to_owned(), label: text_of(names.and_then(|n| n.get(i))) })
            })
            .collect::<Result<_, FormError>>()?
    } else if let Some(titled) = schema.get("oneOf").or_else(|| schema.get("anyOf")).and_then(Value::as_array) {
        titled
            .iter()
            .map(|o| {
                let value =
                    o.get("const").and_then(Value::as_str).ok_or_else(|| unsupported("an option has no const"))?;
                Ok(Choice { value: value.to_owned(), label: text_of(o.get("title")) })
            })
            .collect::<Result<_, FormError>>()?
    } else {
        return Ok(None);
    };
    if options.is_empty() {
        return Err(unsupported("it has no options"));
    }
    if options.len() > MAX_OPTIONS {
        return Err(unsupported(&format!("it has {} options; at most {MAX_OPTIONS} are shown", options.len())));
    }
    if options.iter().any(|o| o.value.chars().count() > MAX_NAME_CHARS) {
        return Err(unsupported("an option's value is too long"));
    }
    Ok(Some(options))
}

/// The option `typed` names: its number as shown (from 1), its value, or its label (ignoring
/// case).
fn pick<'a>(options: &'a [Choice], typed: &str) -> Result<&'a str, String> {
    if let Ok(n) = typed.parse::<usize>()
        && let Some(option) = n.checked_sub(1).and_then(|i| options.get(i))
    {
        return Ok(&option.value);
    }
    options
        .iter()
        .find(|o| o.value == typed)
        .or_else(|| options.iter().find(|o| o.value.eq_ignore_ascii_case(typed)))
        .or_else(|| options.iter().find(|o| o.label.as_deref().is_some_and(|l| l.trim().eq_ignore_ascii_case(typed))))
        .map(|o| o.value.as_str())
        .ok_or_else(|| format!("{typed:?} is not one of the options (type its number)"))
}

fn is_email(text: &str) -> bool {
    let Some((local, domain)) = text.rsplit_once('@') else { return false };
    !local.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
        && domain.split('.').count() >= 2
        && domain.split('.').all(|label| !label.is_empty() && !label.contains('@'))
}

/// An absolute URI: a scheme (a letter, then letters, digits, `+`, `-`, `.`), `:`, and more,
/// without spaces.
fn is_uri(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn digits(text: &str, n: usize) -> Option<u32> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok()).flatten()
}

fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let (Some(year), Some(month), Some(day)) = (digits(y, 4), digits(m, 2), digits(d, 2)) else { return false };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: `T` (or `t`, or a space) between date and time, fractional seconds
/// allowed, an offset required.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't', ' ']) else { return false };
    if !is_date(date) || time.len() < 9 {
        return false;
    }
    let (clock, offset) = match time.find(['Z', 'z', '+', '-']) {
        Some(at) => time.split_at(at),
        None => return false,
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, fraction)) => (hms, Some(fraction)),
        None => (clock, None),
    };
    let mut parts = hms.split(':');
    let (Some(h), Some(m), Some(s), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let time_ok = digits(h, 2).is_some_and(|h| h < 24)
        && digits(m, 2).is_some_and(|m| m < 60)
        && digits(s, 2).is_some_and(|s| s <= 60)
        && fraction.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
    let offset_ok = match offset {
        "Z" | "z" => true,
        other => {
            let Some((oh, om)) = other.get(1..).and_then(|o| o.split_once(':')) else { return false };
            digits(oh, 2).is_some_and(|h| h < 24) && digits(om, 2).is_some_and(|m| m < 60)
        }
    };
    time_ok && offset_ok
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Every field type of the restricted schema, as server-everything asks for them.
    fn every_kind() -> Value {
        json!({"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 10},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "born": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time"},
            "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
            "score": {"type": "number", "minimum": 0, "maximum": 1, "default": 7},
            "ok": {"type": "boolean", "default": false},
            "color": {"type": "string", "enum": ["red", "green"], "default": "green"},
            "hero": {"type": "string", "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Batman"}]},
            "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
            "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "enum": ["a", "b", "c"]}, "default": ["a"]},
            "fish": {"type": "array", "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}}
        }})
    }

    fn field<'a>(form: &'a Form, name: &str) -> &'a Field {
        form.fields.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn every_kind_is_read_with_its_defaults() {
        let form = Form::parse(&every_kind()).unwrap();
        assert_eq!(form.fields.len(), 13);
        assert!(field(&form, "name").required && !field(&form, "email").required);
        assert_eq!(field(&form, "name").label(), "Name");
        assert_eq!(field(&form, "email").label(), "email");
        // 7 is out of the score's bounds: that default is ignored.
        assert_eq!(Value::Object(form.defaults()), json!({"age": 30, "ok": false, "color": "green", "tags": ["a"]}));
        let FieldKind::Choice { options } = &field(&form, "pet").kind else { panic!() };
        assert_eq!(options[1], Choice { value: "p2".into(), label: Some("Dogs".into()) });
    }

    #[test]
    fn typed_answers_are_checked_and_converted() {
        let form = Form::parse(&every_kind()).unwrap();
        let read = |name: &str, typed: &str| field(&form, name).read(typed);
        assert_eq!(read("name", "Ada"), Ok(Some(json!("Ada"))));
        assert_eq!(read("name", ""), Err("a value is required".into()));
        assert!(read("name", "-").unwrap_err().contains("at least 2"), "a required field cannot be left out");
        assert!(read("name", "A").unwrap_err().contains("at least 2"));
        assert!(read("name", "Adalovelace").unwrap_err().contains("at most 10"));
        assert!(read("email", "nope").unwrap_err().contains("email"));
        assert_eq!(read("email", "ada@example.com"), Ok(Some(json!("ada@example.com"))));
        assert_eq!(read("email", ""), Ok(None), "optional and empty: left out");
        assert!(read("site", "not a uri").is_err());
        assert!(read("site", "https://example.com/x").is_ok());
        assert!(read("born", "2025-02-29").is_err(), "not a leap year");
        assert!(read("born", "2024-02-29").is_ok());
        assert!(read("at", "2024-02-29T10:00:00Z").is_ok());
        assert!(read("at", "2024-02-29T10:00:00.5+02:00").is_ok());
        assert!(read("at", "2024-02-29T10:00:00").is_err(), "an offset is required");
        assert!(read("at", "2024-02-29T25:00:00Z").is_err());
        assert_eq!(read("age", ""), Ok(Some(json!(30))));
        assert_eq!(read("age", "-"), Ok(None), "an optional field with a default can be left out");
        assert_eq!(read("age", "42"), Ok(Some(json!(42))));
        assert!(read("age", "4.5").unwrap_err().contains("whole"));
        assert!(read("age", "200").unwrap_err().contains("at most 150"));
        assert!(read("age", "x").unwrap_err().contains("not a number"));
        assert_eq!(read("score", "0.5"), Ok(Some(json!(0.5))));
        assert!(read("score", "NaN").is_err());
        assert_eq!(read("ok", "y"), Ok(Some(json!(true))));
        assert_eq!(read("ok", "No"), Ok(Some(json!(false))));
        assert!(read("ok", "maybe").is_err());
        assert_eq!(read("color", "1"), Ok(Some(json!("red"))));
        assert_eq!(read("color", "GREEN"), Ok(Some(json!("green"))));
        assert!(read("color", "3").unwrap_err().contains("not one of the options"));
        assert_eq!(read("hero", "batman"), Ok(Some(json!("h2"))), "by title");
        assert_eq!(read("pet", "Cats"), Ok(Some(json!("p1"))), "by legacy enumNames");
        assert_eq!(read("tags", "1, c, c"), Ok(Some(json!(["a", "c"]))));
        assert!(read("tags", "1,2,3").unwrap_err().contains("at most 2"));
        assert_eq!(read("tags", ""), Ok(Some(json!(["a"]))));
        assert_eq!(read("fish", "Trout,1"), Ok(Some(json!(["f2", "f1"]))));
    }

    #[test]
    fn whole_answers_are_checked() {
        let form = Form::parse(&every_kind()).unwrap();
        let ok = json!({"name": "Ada", "age": 3, "tags": ["b"]});
        assert_eq!(form.check(ok.as_object().unwrap()), Ok(()));
        let missing = json!({"age": 3});
        assert!(form.check(missing.as_object().unwrap()).unwrap_err().contains("name"));
        let unknown = json!({"name": "Ada", "zzz": 1});
        assert!(form.check(unknown.as_object().unwrap()).unwrap_err().contains("zzz"));
        let wrong = json!({"name": "Ada", "age": "3"});
        assert!(form.check(wrong.as_object().unwrap()).unwrap_err().contains("age"));
    }

    #[test]
    fn what_a_server_sends_is_bounded() {
        assert_eq!(Form::parse(&json!({"type": "object"})), Err(FormError::NotAnObject));
        assert_eq!(Form::parse(&json!({"type": "string", "properties": {}})), Err(FormError::NotAnObject));
        let many: Map<String, Value> =
            (0..=MAX_FIELDS).map(|i| (format!("f{i}"), json!({"type": "boolean"}))).collect();
        assert_eq!(
            Form::parse(&json!({"type": "object", "properties": many})),
            Err(FormError::TooManyFields { count: MAX_FIELDS + 1 })
        );
        let options: Vec<String> = (0..=MAX_OPTIONS).map(|i| i.to_string()).collect();
        let big_enum = json!({"type": "object", "properties": {"e": {"type": "string", "enum": options}}});
        assert!(matches!(Form::parse(&big_enum), Err(FormError::Unsupported { .. })));
        let nested = json!({"type": "object", "properties": {"o": {"type": "object"}}});
        assert!(matches!(Form::parse(&nested), Err(FormError::Unsupported { .. })));
        let long_title = "t".repeat(10 * MAX_LABEL_CHARS);
        let titled = json!({"type": "object", "properties": {"x": {"type": "string", "title": long_title}}});
        let form = Form::parse(&titled).unwrap();
        assert!(form.fields[0].title.as_ref().unwrap().chars().count() <= MAX_LABEL_CHARS);
        let long_name = "n".repeat(MAX_NAME_CHARS + 1);
        let named = json!({"type": "object", "properties": {long_name: {"type": "string"}}});
        assert!(matches!(Form::parse(&named), Err(FormError::Unsupported { .. })));
    }
}
