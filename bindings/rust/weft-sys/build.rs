//! Finds and links libweft, trying in order:
//!
//! 1. `$WEFT_LIB_DIR` (the folder holding libweft.so): the user's explicit choice wins;
//! 2. pkg-config (`pkg-config --variable=libdir weft`), which finds an installed weft
//!    (the Debian package, or `cmake --install` with its `lib/pkgconfig` on PKG_CONFIG_PATH);
//! 3. the repository's own build tree (`../../../build/lib` from this crate), for tests run
//!    from a checkout.
//!
//! pkg-config runs through std::process::Command (no build dependency). The folder found is
//! passed on to dependent crates' build scripts as DEP_WEFT_LIB_DIR (the `links = "weft"`
//! metadata), so they can add an rpath for their tests and examples.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A candidate folder, where it came from, and (when it failed) why.
struct Tried {
    source: &'static str,
    outcome: String,
}

fn has_lib(dir: &Path) -> bool {
    dir.join("libweft.so").exists()
}

/// libdir from pkg-config, or why there is none (pkg-config missing, no weft.pc on its path).
fn pkg_config_libdir() -> Result<PathBuf, String> {
    let out = Command::new("pkg-config")
        .args(["--variable=libdir", "weft"])
        .output()
        .map_err(|e| format!("could not run pkg-config: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        let why = if err.is_empty() { "no weft.pc on PKG_CONFIG_PATH or pkg-config's own path" } else { err };
        return Err(format!("pkg-config knows no weft: {why}"));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if dir.is_empty() {
        return Err("pkg-config's weft.pc has an empty libdir".to_string());
    }
    Ok(PathBuf::from(dir))
}

fn find() -> Result<PathBuf, Vec<Tried>> {
    let mut tried = Vec::new();
    match env::var_os("WEFT_LIB_DIR") {
        Some(d) if !d.is_empty() => {
            let dir = PathBuf::from(d);
            if has_lib(&dir) {
                return Ok(dir);
            }
            // An explicit choice that is wrong is an error, not a reason to pick another copy.
            tried.push(Tried { source: "WEFT_LIB_DIR", outcome: format!("{} holds no libweft.so", dir.display()) });
            return Err(tried);
        }
        _ => tried.push(Tried { source: "WEFT_LIB_DIR", outcome: "not set".to_string() }),
    }
    match pkg_config_libdir() {
        Ok(dir) if has_lib(&dir) => return Ok(dir),
        Ok(dir) => {
            tried.push(Tried { source: "pkg-config", outcome: format!("libdir {} holds no libweft.so", dir.display()) })
        }
        Err(why) => tried.push(Tried { source: "pkg-config", outcome: why }),
    }
    let tree = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../../build/lib");
    if has_lib(&tree) {
        return Ok(tree);
    }
    tried
        .push(Tried { source: "the checkout's build/lib", outcome: format!("{} holds no libweft.so", tree.display()) });
    Err(tried)
}

fn main() {
    println!("cargo:rerun-if-env-changed=WEFT_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-changed=build.rs");
    let dir = match find() {
        Ok(dir) => dir,
        Err(tried) => {
            let lines: Vec<String> = tried.iter().map(|t| format!("  - {}: {}", t.source, t.outcome)).collect();
            panic!(
                "weft-sys: libweft.so not found. Tried, in order:\n{}\nFix one of them: set \
                 WEFT_LIB_DIR to the folder holding libweft.so; or install weft (its .deb, or \
                 `cmake --install build --prefix P` and PKG_CONFIG_PATH=P/lib/pkgconfig); or \
                 build it in this checkout (scripts/build, making build/lib/libweft.so).",
                lines.join("\n")
            );
        }
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=weft");
    println!("cargo:lib_dir={}", dir.display());
    // For this crate's own tests.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}
