//! `store-repair`: migrate, check and mend a session database (see the contract).
fn main() {}
