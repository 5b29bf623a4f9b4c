//! The macros behind the one run configuration: `section!` declares a
//! configuration section once (struct, defaults, field table, setters);
//! `names_enum!` declares an enumeration setting with its one parser; `summary_struct!` a
//! result struct with its optional sections declared once.

/// Declares a section: the struct, its defaults and its field table.
macro_rules! section {
    ($(#[doc = $sdoc:literal])* $name:ident $key:literal {
        $( $(#[doc = $doc:literal])+ $f:ident : $ty:ty = $def:expr , $opts:expr ; )+
    }) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name { $( $(#[doc = $doc])+ pub $f: $ty, )+ }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $f: $def, )+ }
            }
        }

        impl $crate::config::flags::FieldSource for $name {
            fn fields() -> Vec<$crate::config::Field> {
                $name::fields()
            }
        }

        impl $name {
            /// The section's TOML key.
            pub const KEY: &'static str = $key;
            /// The section's doc comment.
            pub const DOC: &'static str = concat!($($sdoc, "\n"),*);

            /// Its fields, in declaration order.
            pub fn fields() -> Vec<$crate::config::Field> {
                vec![$($crate::config::Field {
                    section: $key,
                    name: stringify!($f),
                    doc: concat!($($doc, "\n"),+),
                    form: <$ty as $crate::config::ConfigValue>::FORM,
                    possible: <$ty as $crate::config::ConfigValue>::possible(),
                    switch: <$ty as $crate::config::ConfigValue>::SWITCH,
                    repeated: <$ty as $crate::config::ConfigValue>::REPEATED,
                    list: <$ty as $crate::config::ConfigValue>::LIST,
                    comma_axis: <$ty as $crate::config::ConfigValue>::COMMA_AXIS,
                    number: <$ty as $crate::config::ConfigValue>::NUMBER,
                    opts: $opts,
                    check: |s| <$ty as $crate::config::ConfigValue>::parse(s).map(|_| ()),
                    default: || { let d: $ty = $def; $crate::config::ConfigValue::show(&d) },
                }),+]
            }

            /// Sets field `name` from text items; `Ok(false)` if there is no such field.
            pub fn set(&mut self, name: &str, items: &[&str]) -> Result<bool, $crate::error::ValueError> {
                match name {
                    $( stringify!($f) => { self.$f = <$ty as $crate::config::ConfigValue>::parse_many(items)?; Ok(true) } )+
                    _ => Ok(false),
                }
            }

            /// The text form of field `name`.
            pub fn get(&self, name: &str) -> Option<String> {
                match name {
                    $( stringify!($f) => Some($crate::config::ConfigValue::show(&self.$f)), )+
                    _ => None,
                }
            }

            /// The TOML form of field `name` (`None` when unset or unknown).
            pub fn get_toml(&self, name: &str) -> Option<toml::Value> {
                match name {
                    $( stringify!($f) => $crate::config::ConfigValue::to_toml(&self.$f), )+
                    _ => None,
                }
            }
        }
    };
}

/// Declares an enumeration of named choices with its one parser and printer
/// (`FromStr`, `Display`, serde as the name, its JSON Schema, `clap::ValueEnum`,
/// [`ConfigValue`](crate::config::ConfigValue)), so every enum setting reads and reports alike.
#[macro_export]
macro_rules! names_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident ($what:literal) { $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name { $($(#[$vm])* $v),+ }

        impl $name {
            /// Every name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            /// This value's name.
            pub fn name(self) -> &'static str {
                match self { $(Self::$v => $s),+ }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::error::ValueError;
            fn from_str(s: &str) -> Result<Self, $crate::error::ValueError> {
                match s.trim() {
                    $($s => Ok(Self::$v),)+
                    _ => Err($crate::error::ValueError::new(s, format!("unknown {} `{}`", $what, s))
                        .expecting($crate::config::value::one_of(Self::NAMES))),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(::serde::de::Error::custom)
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string", "enum": Self::NAMES, "description": $what })
            }
        }

        impl ::clap::ValueEnum for $name {
            fn value_variants<'a>() -> &'a [Self] {
                &[$(Self::$v),+]
            }
            fn to_possible_value(&self) -> Option<::clap::builder::PossibleValue> {
                Some(::clap::builder::PossibleValue::new(self.name()))
            }
        }

        impl $crate::config::value::ConfigValue for $name {
            const FORM: &'static str = concat!("one of: ", $($s, " "),+);
            const COMMA_AXIS: bool = true;
            fn parse(s: &str) -> Result<Self, $crate::error::ValueError> {
s.parse()
}
            fn show(&self) -> String {
                self.name().to_string()
            }
            fn possible() -> Option<&'static [&'static str]> {
                Some(Self::NAMES)
            }
        }
    };
}

/// Serde (and a JSON Schema: a string) for types with `Display` and `FromStr`: as
/// their text form (the same text a flag or TOML key takes).
#[macro_export]
macro_rules! serde_as_display {
    ($($t:ty),*) => {$(
        impl ::serde::Serialize for $t {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> ::serde::Deserialize<'de> for $t {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as ::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err(::serde::de::Error::custom)
            }
        }
        impl ::schemars::JsonSchema for $t {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string" })
            }
        }
    )*};
}

/// A result struct whose optional sections are declared once: the fields after `optional`
/// become `pub NAME: Option<TYPE>` with `#[serde(default, skip_serializing_if =
/// "Option::is_none")]` (absent from the file when `None`, `None` when absent), after the
/// required fields, in the order written. ([`crate::summary::Summary`].)
#[macro_export]
macro_rules! summary_struct {
    (
        $(#[$sattr:meta])*
        pub struct $name:ident {
            $( $(#[$fattr:meta])* pub $field:ident : $fty:ty, )*
        }
        optional {
            $( $(#[$oattr:meta])* $ofield:ident : $oty:ty, )*
        }
    ) => {
        $(#[$sattr])*
        pub struct $name {
            $( $(#[$fattr])* pub $field: $fty, )*
            $(
                $(#[$oattr])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $ofield: Option<$oty>,
            )*
        }
    };
}
