//! A new migration file does not otherwise trigger a rebuild of the embedded list.
fn main() {
    println!("cargo:rerun-if-changed=../../migrations");
    println!("cargo:rerun-if-changed=../../migrations-postgres");
}
