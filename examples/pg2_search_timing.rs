// Temporary (not committed): times Store::search on a PostgreSQL schema filled by SQL.
use session_store::{SearchOptions, SessionId, Store};
use std::time::Instant;

fn main() {
    let base = std::env::var("SESSION_STORE_TEST_PG").unwrap();
    let messages: i64 = std::env::args().nth(1).unwrap().parse().unwrap();
    let schema = format!("bench_search_{messages}");
    let mut client = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let fresh = client
        .query_one("SELECT to_regnamespace($1) IS NULL", &[&schema])
        .unwrap()
        .get::<_, bool>(0);
    let url = format!("{base}?options=-c%20search_path%3D{schema}");
    if fresh {
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .unwrap();
        drop(Store::open(&url).unwrap());
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let t = Instant::now();
        let sessions = messages / 100;
        c.batch_execute(&format!("
            INSERT INTO sessions (id, created_at, updated_at)
              SELECT 's' || lpad(g::text, 7, '0'), '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z' FROM generate_series(1, {sessions}) g;
            INSERT INTO messages (session_id, seq, turn_index, role, compacted, created_at)
              SELECT 's' || lpad((1 + (g - 1) / 100)::text, 7, '0'), 1 + (g - 1) % 100, ((g - 1) % 100) / 2,
                     CASE WHEN (g - 1) % 2 = 0 THEN 'user' ELSE 'assistant' END, 0, '2026-01-01T00:00:00Z'
              FROM generate_series(1, {messages}) g;
            INSERT INTO parts (message_id, ordinal, kind, text, is_error)
              SELECT m.id, 0, 'text',
                     (SELECT string_agg('w' || (floor(random() * 5000))::int, ' ') FROM generate_series(1, 12) k WHERE m.id > 0)
                     || CASE WHEN m.id % 10 = 0 THEN ' common' ELSE '' END
                     || CASE WHEN m.id % ({messages} / 10) = 7 THEN ' zanzibar' ELSE '' END, 0
              FROM messages m;
            ANALYZE;")).unwrap();
        eprintln!("built {messages} messages in {:?}", t.elapsed());
    }
    let store = Store::open(&url).unwrap();
    let time = |name: &str, f: &dyn Fn() -> usize| {
        let mut times = Vec::new();
        let mut n = 0;
        for _ in 0..9 {
            let t = Instant::now();
            n = f();
            times.push(t.elapsed());
        }
        times.sort();
        println!("{messages}\t{name}\t{n} hits\tmedian {:?}", times[4]);
    };
    let all = SearchOptions::default();
    time("rare_word", &|| {
        store.search("zanzibar", &all).unwrap().len()
    });
    time("two_words", &|| {
        store.search("w17 w4242", &all).unwrap().len()
    });
    time("vocabulary_word", &|| {
        store.search("w123", &all).unwrap().len()
    });
    time("common_word_top20", &|| {
        store.search("common", &all).unwrap().len()
    });
    let one = SearchOptions {
        session: Some(SessionId::new("s0000042")),
        ..Default::default()
    };
    time("one_session_common_word", &|| {
        store.search("common", &one).unwrap().len()
    });
    let size = store.size_report(5).unwrap();
    println!(
        "{messages}\tsize: relations {} bytes, search index {} bytes",
        size.file_bytes, size.search_index_bytes
    );
}
