//! `session-store`: inspect and exchange sessions (see the contract).
fn main() {}
