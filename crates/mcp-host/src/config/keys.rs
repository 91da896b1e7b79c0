//! The keys a configuration table accepts, read from the deserializer itself, so that the
//! documentation test and the foreign readers never keep a list of their own.

use serde::Deserialize;
use serde::de::{self, Visitor};

/// A deserializer that only records the field names a derived struct asks for.
struct Capture<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for Capture<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("captured"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// The keys struct `T` (a derived `Deserialize`) accepts, as the file spells them.
pub(crate) fn fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Capture(&mut fields));
    fields
}
