// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! [`c_layout!`]: the one table of a C layout's size and field offsets.
//!
//! Each `#[repr(C)]` type of [`super::abi`] that mirrors a C type is
//! followed by one `c_layout!` table.  Every number in it is written once and
//! checked twice:
//!
//! * always, by `const` assertions: a wrong size or offset fails the build;
//! * in test builds, against the C compiler: the table implements
//!   `CLayout`, whose rows (`sizeof(...)`/`offsetof(...)` C expressions
//!   and the value Rust uses) the unit test `abi::c_layout` compiles against
//!   the installed `infiniband/verbs.h` and `rdma/ib_user_verbs.h`.
//!
//! Types without an installed C header (`libibverbs/driver.h`, the
//! provider's own command buffers) use the `private` form, which generates
//! the assertions only.

/// A table of C layouts, implemented (in test builds) by every type whose
/// [`c_layout!`] table names an installed C type.
#[cfg(test)]
pub(crate) trait CLayout {
    /// Appends the table's `(C expression, value Rust uses)` rows: the size
    /// first, then one row per C name of every field.
    fn c_rows(rows: &mut Vec<(&'static str, usize)>);
}

/// Declares the size and field offsets of a `#[repr(C)]` type, once.
///
/// ```text
/// c_layout! {
///     Type = C-TYPE, size SIZE;
///     field @ OFFSET, other_field as "c.name" @ OFFSET, ...
/// }
/// ```
///
/// `SIZE` and each `OFFSET` are `usize` constant expressions, kept as
/// written (`280 + PTHREAD_MUTEX_SIZE`, `size_of::<IbvCq>() + 16`).  The
/// table expands to `const` assertions of `size_of::<Type>() == SIZE` and
/// of `offset_of!(Type, field) == OFFSET` for every field, and, under
/// `#[cfg(test)]`, to an `impl CLayout for Type` listing one C row per
/// assertion.  Not every field needs to be listed, only those the provider
/// (or libibverbs' view of the struct) relies on.
///
/// `C-TYPE` is one of:
///
/// * `"struct ibv_device"` (any C type name, e.g. `"pthread_mutex_t"`):
///   rows `sizeof(struct ibv_device)` and `offsetof(struct ibv_device, f)`;
/// * `"struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_resize_cq"`: a Rust
///   type that concatenates C structs (libibverbs' `DECLARE_CMD` command
///   buffers); the fields belong to the last one, whose offsets are shifted
///   by the `sizeof` of the ones before it: rows `sizeof(A) + sizeof(B)` and
///   `sizeof(A) + offsetof(B, f)`;
/// * `"wr.rdma" in "struct ibv_send_wr" @ BASE`: a Rust type for a member
///   (often of anonymous type) of a C struct, `BASE` being that member's
///   offset in the outer struct: rows `sizeof(((struct ibv_send_wr
///   *)0)->wr.rdma)` and `offsetof(struct ibv_send_wr, wr.rdma.f)`, whose
///   value is `BASE + offset_of!(Type, f)`.  `BASE` is not a number of its
///   own but the `offset_of!` of that member in the outer Rust type, whose
///   table asserts it; a wrong `BASE` expression is caught by the C
///   cross-check only;
/// * `private "struct verbs_device"` or just `private`: no installed C
///   header (the string only documents the C name); assertions only.
///
/// A field whose C name differs from the Rust one gives it with `as`:
/// `abi_placeholder3 as "_ABI_placeholder3" @ 304`; a nested designator is
/// fine (`xrc_remote_srqn as "qp_type.xrc.remote_srqn" @ 72`), and a Rust
/// field standing for a C union gives each member (`imm_data_or_inv as
/// "imm_data" | "invalidate_rkey" @ 36`: one assertion, two C rows).
///
/// A wrong number fails the build with a message naming the table entry,
/// e.g. `C layout: offset_of!(IbvDevice, node_type) != 16`.
macro_rules! c_layout {
    // --- internal rules --------------------------------------------------

    // The assertions of one table.
    (@assert $T:ident, $size:expr;
        $($f:ident $(as $($cn:literal)|+)? @ $off:expr),* $(,)?) => {
        const _: () = ::core::assert!(
            ::core::mem::size_of::<$T>() == $size,
            "{}",
            ::core::concat!(
                "C layout: size_of::<", ::core::stringify!($T), ">() != ",
                ::core::stringify!($size),
            ),
        );
        $(
            const _: () = ::core::assert!(
                ::core::mem::offset_of!($T, $f) == $off,
                "{}",
                ::core::concat!(
                    "C layout: offset_of!(", ::core::stringify!($T), ", ",
                    ::core::stringify!($f), ") != ", ::core::stringify!($off),
                ),
            );
        )*
    };

    // `"A" + "B" + "C"`: moves every literal but the last into the prefix.
    (@split $T:ident, [$($pre:literal)*] $cty:literal; $($fields:tt)*) => {
        $crate::ffi::layout::c_layout!(@rows $T, [top [$($pre)*] $cty]; $($fields)*);
    };
    (@split $T:ident, [$($pre:literal)*] $x:literal $($more:literal)+; $($fields:tt)*) => {
        $crate::ffi::layout::c_layout!(@split $T, [$($pre)* $x] $($more)+; $($fields)*);
    };

    // The C rows of one table; `$c` is `[top [PREFIX...] "C type"]` or
    // `[in "C type" "member" (BASE)]`.
    (@rows $T:ident, $c:tt;
        $($f:ident $(as $($cn:literal)|+)? @ $off:expr),* $(,)?) => {
        #[cfg(test)]
        impl $crate::ffi::layout::CLayout for $T {
            fn c_rows(rows: &mut ::std::vec::Vec<(&'static str, usize)>) {
                $crate::ffi::layout::c_layout!(@size rows, $T, $c);
                $(
                    $crate::ffi::layout::c_layout!(@names rows, $T, $c, $f, [$($($cn)+)?]);
                )*
            }
        }
    };

    (@size $rows:ident, $T:ident, [top [$($pre:literal)*] $cty:literal]) => {
        $rows.push((
            ::core::concat!($("sizeof(", $pre, ") + ",)* "sizeof(", $cty, ")"),
            ::core::mem::size_of::<$T>(),
        ));
    };
    (@size $rows:ident, $T:ident, [in $cty:literal $path:literal ($base:expr)]) => {
        $rows.push((
            ::core::concat!("sizeof(((", $cty, " *)0)->", $path, ")"),
            ::core::mem::size_of::<$T>(),
        ));
    };

    // A field without `as` is called the same in C.
    (@names $rows:ident, $T:ident, $c:tt, $f:ident, []) => {
        $crate::ffi::layout::c_layout!(@offset $rows, $T, $c, $f, ::core::stringify!($f));
    };
    (@names $rows:ident, $T:ident, $c:tt, $f:ident, [$($cn:literal)+]) => {
        $( $crate::ffi::layout::c_layout!(@offset $rows, $T, $c, $f, $cn); )+
    };

    (@offset $rows:ident, $T:ident, [top [$($pre:literal)*] $cty:literal], $f:ident,
        $($name:tt)+) => {
        $rows.push((
            ::core::concat!(
                $("sizeof(", $pre, ") + ",)* "offsetof(", $cty, ", ", $($name)+, ")"
            ),
            ::core::mem::offset_of!($T, $f),
        ));
    };
    (@offset $rows:ident, $T:ident, [in $cty:literal $path:literal ($base:expr)], $f:ident,
        $($name:tt)+) => {
        $rows.push((
            ::core::concat!("offsetof(", $cty, ", ", $path, ".", $($name)+, ")"),
            $base + ::core::mem::offset_of!($T, $f),
        ));
    };

    // --- the forms of a table ---------------------------------------------

    ($T:ident = private $($cty:literal)?, size $size:expr; $($fields:tt)*) => {
        $crate::ffi::layout::c_layout!(@assert $T, $size; $($fields)*);
    };
    ($T:ident = $path:literal in $cty:literal @ $base:expr, size $size:expr;
        $($fields:tt)*) => {
        $crate::ffi::layout::c_layout!(@assert $T, $size; $($fields)*);
        // `BASE` is only read by the C rows; make every build evaluate it.
        const _: usize = $base;
        $crate::ffi::layout::c_layout!(@rows $T, [in $cty $path ($base)]; $($fields)*);
    };
    ($T:ident = $first:literal $(+ $more:literal)*, size $size:expr; $($fields:tt)*) => {
        $crate::ffi::layout::c_layout!(@assert $T, $size; $($fields)*);
        $crate::ffi::layout::c_layout!(@split $T, [] $first $($more)*; $($fields)*);
    };
}
pub(crate) use c_layout;
