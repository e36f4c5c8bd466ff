//! Adds an rpath to libweft's folder (from weft-sys, DEP_WEFT_LIB_DIR) for this crate's own
//! tests, examples and binaries, so `cargo test` runs without LD_LIBRARY_PATH. Programs that
//! depend on `weft` set their own rpath or LD_LIBRARY_PATH (see bindings/README.md).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_WEFT_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_WEFT_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
