//! Database URLs: which locations name a PostgreSQL database, and how one is shown (without
//! its password). Known to every build, so that one without the `postgres` feature can
//! refuse a URL by name.

/// True when `location` names a PostgreSQL database (`postgres://` or `postgresql://`)
/// rather than a file: what [`crate::Store::open`] and the tools' `--db` dispatch on.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A database URL fit to print: `postgres://user:secret@host/db` shown as
/// `postgres://user@host/db`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1:5432/db?options=x"),
            "postgres://u@127.0.0.1:5432/db?options=x"
        );
        assert_eq!(redact("postgres://127.0.0.1/db"), "postgres://127.0.0.1/db");
        assert!(is_url("postgresql://x/y"));
        assert!(!is_url("/tmp/postgres://x"));
    }
}
