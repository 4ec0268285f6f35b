//! [`registers!`](crate::registers): one declaration per register.

/// Declares registers: for each, a zero-sized type implementing
/// [`Register`](crate::reg::Register) (and [`Array`](crate::reg::Array) for arrays), with
/// its fields as associated [`Field`](crate::reg::Field) constants.
///
/// ```text
/// /// doc (offset and datasheet section)
/// pub NAME: ACCESS<WIDTH> @ OFFSET [COUNT; stride STRIDE]? (in SPACE)? {
///     /// doc
///     FIELD: HI(:LO)?,
/// }
/// ```
///
/// `ACCESS` is `Ro`, `Rc` (clear on read), `Wo` or `Rw`; `WIDTH` `u8`..`u64`; `SPACE`
/// defaults to [`Bar`](crate::reg::Bar) (offsets from the start of the register
/// window), or names a block type whose registers are reached through a
/// [`Block`](crate::reg::Block). Bits are written as the datasheet writes them: `26` for
/// one bit, `18:5` for bits 18 down to 5.
#[macro_export]
macro_rules! registers {
    ($(
        $(#[$m:meta])*
        $vis:vis $name:ident : $acc:ident < $w:ty > @ $off:literal
            $( [ $count:literal ; stride $stride:literal ] )?
            $( in $space:ty )?
        {
            $( $(#[$fm:meta])* $field:ident : $hi:literal $( : $lo:literal )? ),* $(,)?
        }
    )*) => {$(
        $(#[$m])*
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis struct $name;

        impl $crate::reg::Register for $name {
            type Access = $crate::reg::$acc;
            type Value = $w;
            type Space = $crate::__reg_space!($($space)?);
            type Shape = $crate::__reg_shape!($($count)?);
            const OFFSET: usize = $off;
            const NAME: &'static str = stringify!($name);
        }

        #[allow(dead_code)]
        impl $name {
            $(
                $(#[$fm])*
                pub const $field: $crate::reg::Field<$name> = $crate::reg::Field::hi_lo($hi, &[$($lo)?]);
            )*
        }

        $crate::__reg_array!($name $(, $count, $stride)?);
    )*};
}

/// The space of a declared register: `Bar` unless given.
#[doc(hidden)]
#[macro_export]
macro_rules! __reg_space {
    () => {
        $crate::reg::Bar
    };
    ($s:ty) => {
        $s
    };
}

/// The shape of a declared register: `Many` when it has a count.
#[doc(hidden)]
#[macro_export]
macro_rules! __reg_shape {
    () => {
        $crate::reg::Single
    };
    ($count:literal) => {
        $crate::reg::Many
    };
}

/// The array half of a declared array register.
#[doc(hidden)]
#[macro_export]
macro_rules! __reg_array {
    ($name:ident) => {};
    ($name:ident, $count:literal, $stride:literal) => {
        impl $crate::reg::Array for $name {
            const COUNT: usize = $count;
            const STRIDE: usize = $stride;
        }

        #[allow(dead_code)]
        impl $name {
            /// Element `i`, or `None` past the end.
            #[inline]
            pub fn at(self, i: usize) -> Option<$crate::reg::At<Self>> {
                <Self as $crate::reg::Array>::at(self, i)
            }

            /// Every element, in order.
            #[inline]
            pub fn iter(self) -> impl Iterator<Item = $crate::reg::At<Self>> {
                <Self as $crate::reg::Array>::iter(self)
            }

            /// Elements in the array.
            pub const COUNT: usize = $count;
        }
    };
}
