//! Database URLs: which locations name a PostgreSQL database, and how one is shown (without
//! its password). Known to every build, so that one without the `postgres` feature can
//! refuse a URL by name.

/// True when `location` names a PostgreSQL database (`postgres://` or `postgresql://`)
/// rather than a file: what [`crate::Store::open`] and the tools' `--db` dispatch on.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// A database URL fit to print, wherever a password can be in it: the userinfo's password
/// (`postgres://user:secret@host/db` is shown as `postgres://user@host/db`, the password
/// taken to end at the last `@`, so an unescaped `/`, `?` or `@` in it leaks nothing) and every query parameter that is one (`password`, `sslpassword`, their
/// names compared after percent-decoding and in any case, after `?` or `&`), which is left
/// out. The one place the store hides secrets: every message that names a URL goes through it.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The userinfo ends at the last `@`: a password may hold `/`, `?` or `@` unescaped.
    let without_userinfo = match rest.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{user}@{host}")
        }
        None => rest.to_owned(),
    };
    let (before_query, query) = match without_userinfo.find(['?', '#']) {
        Some(at) => without_userinfo.split_at(at),
        None => (without_userinfo.as_str(), ""),
    };
    format!("{scheme}://{before_query}{}", redact_query(query))
}

/// The query (and fragment) of a URL, `?` included, without the parameters that are
/// passwords; `?` is dropped when none is left.
fn redact_query(query: &str) -> String {
    let (query, fragment) = match query.find('#') {
        Some(at) => query.split_at(at),
        None => (query, ""),
    };
    let Some(params) = query.strip_prefix('?') else {
        return format!("{query}{fragment}");
    };
    let kept: Vec<&str> = params
        .split('&')
        .filter(|param| {
            let key = param.split_once('=').map_or(*param, |(key, _)| key);
            let key = percent_decoded(key).to_ascii_lowercase();
            key != "password" && key != "sslpassword"
        })
        .collect();
    if kept.is_empty() {
        fragment.to_owned()
    } else {
        format!("?{}{fragment}", kept.join("&"))
    }
}

/// `text` with each `%XX` read as the byte it names (and `+` as a space), lossily as UTF-8.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                at += 1;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
        for (url, shown) in [
            ("postgres://h/db?password=secret", "postgres://h/db"),
            (
                "postgres://h/db?user=u&password=secret",
                "postgres://h/db?user=u",
            ),
            (
                "postgres://h/db?password=secret&user=u",
                "postgres://h/db?user=u",
            ),
            (
                "postgres://h/db?pass%77ord=secret&x=1",
                "postgres://h/db?x=1",
            ),
            ("postgres://h/db?PASSWORD=secret", "postgres://h/db"),
            ("postgres://h/db?sslpassword=secret", "postgres://h/db"),
            ("postgres://u:se%2Fcret@h/db", "postgres://u@h/db"),
            ("postgres://u:se/cr@et@h/db", "postgres://u@h/db"),
            ("postgres://u:se?cret@h/db", "postgres://u@h/db"),
            ("postgres://h/db?password=s&u=a@b", "postgres://h/db?u=a@b"),
            (
                "postgresql://u:secret@h/db?password=secret#frag",
                "postgresql://u@h/db#frag",
            ),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
        assert!(is_url("postgresql://x/y"));
        assert!(!is_url("/tmp/postgres://x"));
    }
}
