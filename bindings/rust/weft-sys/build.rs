//! Links libweft: from $WEFT_LIB_DIR, else the repository's build/lib (../../../build/lib from
//! this crate). The directory is passed on to dependent crates' build scripts as
//! DEP_WEFT_LIB_DIR (the `links = "weft"` metadata), so they can add an rpath for their
//! tests and examples.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=WEFT_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = match env::var_os("WEFT_LIB_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../../build/lib"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    if !dir.join("libweft.so").exists() {
        panic!(
            "weft-sys: libweft.so not found in {} - build weft first (scripts/build in the \
             repository root) or set WEFT_LIB_DIR to the folder holding libweft.so",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=weft");
    println!("cargo:lib_dir={}", dir.display());
    // For this crate's own tests.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}
