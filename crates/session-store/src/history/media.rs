//! What the bytes of a stored image or document are, read from their first bytes: the one
//! place every renderer and check asks. Providers read the bytes, not the declared type:
//! Anthropic refuses an image whose `media_type` is not what its data is ("Image does not
//! match the provided media type image/png") or none of the four it takes; OpenAI refuses
//! data that is none of the four it takes ("You uploaded an unsupported image. Please make
//! sure your image has of one the following formats: ['png', 'jpeg', 'gif', 'webp']"), and
//! takes a GIF only when it is still (its documentation: "non-animated GIF").

use base64::Engine;
use serde_json::Value;

/// How many first bytes tell every type here: the signatures below end by byte 12.
const SIGNATURE_BYTES: usize = 12;

/// The image types Anthropic and OpenAI both take, each with the bytes that tell it and
/// where they stand.
const IMAGE_TYPES: [(&str, &[u8], usize); 5] = [
    ("image/png", b"\x89PNG\r\n\x1a\n", 0),
    ("image/jpeg", b"\xff\xd8\xff", 0),
    ("image/gif", b"GIF87a", 0),
    ("image/gif", b"GIF89a", 0),
    ("image/webp", b"WEBP", 8),
];

/// The image type (`image/png`, `image/jpeg`, `image/gif`, `image/webp`) base64 `data` is,
/// or `None` when it is none of them (HEIC, TIFF, SVG, not base64 at all).
pub(crate) fn image_type(data: &str) -> Option<&'static str> {
    let bytes = decoded_head(data, SIGNATURE_BYTES)?;
    IMAGE_TYPES.iter().find_map(|(kind, signature, at)| {
        bytes
            .get(*at..at + signature.len())
            .is_some_and(|b| b == *signature)
            .then_some(*kind)
    })
}

/// The width and height in pixels of the image base64 `data` holds, read from its header
/// (PNG, GIF, WebP) or its frame marker (JPEG, after whatever metadata comes first); `None`
/// when it is none of them or its header cannot be read.
pub(crate) fn image_size(data: &str) -> Option<(u32, u32)> {
    let kind = image_type(data)?;
    if kind == "image/jpeg" {
        return jpeg_size(data);
    }
    // Every other header is in its first 30 bytes.
    let bytes = decoded_head(data, 48)?;
    let le16 = |at: usize| {
        Some(u32::from(u16::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let le24 = |at: usize| {
        Some(u32::from_le_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
            *bytes.get(at + 2)?,
            0,
        ]))
    };
    let be32 = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
    match kind {
        "image/png" => Some((be32(16)?, be32(20)?)),
        "image/gif" => Some((le16(6)?, le16(8)?)),
        "image/webp" => match bytes.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            b"VP8L" => {
                let bits = u32::from_le_bytes(bytes.get(21..25)?.try_into().ok()?);
                Some(((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        },
        _ => None,
    }
}

/// A JPEG's size, from its start-of-frame marker: the segments before it (metadata, often
/// tens of kilobytes) are stepped over by their lengths, each read from the few bytes that
/// hold it, so nothing else of the data is decoded.
fn jpeg_size(data: &str) -> Option<(u32, u32)> {
    let be16 = |bytes: &[u8], at: usize| {
        Some(u32::from(u16::from_be_bytes([
            *bytes.get(at)?,
            *bytes.get(at + 1)?,
        ])))
    };
    let mut at = 2;
    // A JPEG has tens of segments; a run of fill bytes or markers longer than this is no
    // JPEG to size, and is not walked to its end on every export.
    for _ in 0..1024 {
        let head = bytes_at(data, at, 9)?;
        if *head.first()? != 0xff {
            return None;
        }
        let marker = *head.get(1)?;
        match marker {
            0xff => at += 1,
            0x01 | 0xd0..=0xd9 => at += 2,
            0xc0..=0xcf if !matches!(marker, 0xc4 | 0xc8 | 0xcc) => {
                return Some((be16(&head, 7)?, be16(&head, 5)?));
            }
            _ => at += 2 + usize::try_from(be16(&head, 2)?).ok()?,
        }
    }
    None
}

/// The bytes `at..at + len` of base64 `data` (fewer at its end), decoding only the
/// characters that hold them: every 4 characters are 3 bytes.
fn bytes_at(data: &str, at: usize, len: usize) -> Option<Vec<u8>> {
    let first = at / 3 * 4;
    let last = (at + len).div_ceil(3) * 4;
    let chars = data.get(first..last.min(data.len()) / 4 * 4)?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(chars)
        .ok()?;
    decoded
        .get(at % 3..)
        .map(|rest| rest.iter().take(len).copied().collect())
}

/// The first `max` bytes (or fewer) of base64 `data`, decoded.
fn decoded_head(data: &str, max: usize) -> Option<Vec<u8>> {
    let chars = data.len().min(max / 3 * 4) / 4 * 4;
    base64::engine::general_purpose::STANDARD
        .decode(data.get(..chars)?)
        .ok()
}

/// The image type Gemini is sent base64 `data` under, among those it takes ("MIME type must
/// be image/png, image/jpeg, image/webp, image/heic, or image/heif"): `None` for a GIF, a
/// BMP, a TIFF, an SVG (each refused, "Unsupported MIME type: image/gif", and every later
/// request of the session with it).
pub(crate) fn gemini_image_type(data: &str) -> Option<&'static str> {
    match image_type(data) {
        Some("image/gif") => None,
        Some(kind) => Some(kind),
        // HEIC and HEIF: an ISO media file (`ftyp` at byte 4) of one of their brands.
        None => {
            let bytes = decoded_head(data, SIGNATURE_BYTES)?;
            if bytes.get(4..8)? != b"ftyp" {
                return None;
            }
            match bytes.get(8..12)? {
                b"heic" | b"heix" | b"heim" | b"heis" => Some("image/heic"),
                b"mif1" | b"msf1" => Some("image/heif"),
                _ => None,
            }
        }
    }
}

/// The image type OpenAI is sent base64 `data` under: one of the four it takes, and a GIF
/// only when it is still; `None` otherwise.
fn openai_image_type(data: &str) -> Option<&'static str> {
    image_type(data).filter(|kind| *kind != "image/gif" || gif_frames(data, 2) < 2)
}

/// The frames (image descriptors) of the GIF base64 `data` holds, counted up to `max`: the
/// data is decoded once and its blocks are walked by their lengths from the header, so a
/// still GIF is stepped through to its end and an animation stops at its second frame. A
/// block that cannot be read (the data's end, bytes that are no block, data that is not
/// base64) ends the count.
fn gif_frames(data: &str, max: usize) -> usize {
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(data) else {
        return 0;
    };
    let byte = |at: usize| bytes.get(at).copied();
    // Past a block's sub-blocks (each a length byte and that many bytes; a zero ends them).
    let sub_blocks_end = |mut at: usize| loop {
        let size = byte(at)?;
        at += 1 + usize::from(size);
        if size == 0 {
            return Some(at);
        }
    };
    // A colour table of 2^(n+1) entries of 3 bytes follows a descriptor whose flags say so.
    let table = |flags: u8| {
        if flags & 0x80 == 0 {
            0
        } else {
            3 << ((flags & 7) + 1)
        }
    };
    let Some(flags) = byte(10) else {
        return 0;
    };
    let mut at = 13 + table(flags);
    let mut frames = 0;
    while frames < max {
        let next = match byte(at) {
            // An extension: its label, then its sub-blocks.
            Some(0x21) => sub_blocks_end(at + 2),
            // A frame: its descriptor, its colour table, the LZW code size, its data.
            Some(0x2c) => {
                frames += 1;
                byte(at + 9).and_then(|flags| sub_blocks_end(at + 11 + table(flags)))
            }
            // The trailer, or bytes that are no block.
            _ => None,
        };
        let Some(next) = next else {
            break;
        };
        at = next;
    }
    frames
}

/// Whether base64 `data` is a PDF.
pub(crate) fn is_pdf(data: &str) -> bool {
    decoded_head(data, SIGNATURE_BYTES).is_some_and(|bytes| bytes.starts_with(b"%PDF-"))
}

/// An image `source` as an OpenAI image URL (Chat Completions `image_url.url`, Responses
/// `image_url`): a URL as it is; base64 data as a `data:` URL under the type its bytes are;
/// `None` when it is neither, or its bytes are no image OpenAI takes, an animated GIF among
/// them (the renderer describes the part instead).
pub(crate) fn openai_image_url(source: &Value) -> Option<String> {
    match source.get("type")?.as_str()? {
        "url" => source.get("url")?.as_str().map(str::to_owned),
        "base64" => {
            let data = source.get("data")?.as_str()?;
            Some(format!("data:{};base64,{data}", openai_image_type(data)?))
        }
        _ => None,
    }
}

/// Why OpenAI refuses the image URL `url`: a `data:` URL whose base64 bytes are no image it
/// takes. Other URLs are the server's to fetch.
pub(crate) fn image_url_fault(url: &str) -> Option<&'static str> {
    let data = url.strip_prefix("data:")?;
    let data = data.split_once(";base64,").map(|(_, data)| data)?;
    match (image_type(data), openai_image_type(data)) {
        (_, Some(_)) => None,
        (Some(_), None) => Some("an animated GIF (OpenAI takes still GIFs only)"),
        (None, None) => Some("image data that is not a PNG, JPEG, GIF or WebP"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn an_image_is_the_type_its_first_bytes_are() {
        let cases: [(&[u8], Option<&str>); 7] = [
            (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", Some("image/png")),
            (b"\xff\xd8\xff\xe0\0\x10JFIF", Some("image/jpeg")),
            (b"GIF89a\x01\0\x01\0", Some("image/gif")),
            (b"RIFF\x10\0\0\0WEBPVP8 ", Some("image/webp")),
            (b"\0\0\0\x18ftypheic\0\0", None),
            (b"<svg xmlns=", None),
            (b"", None),
        ];
        for (bytes, kind) in cases {
            assert_eq!(image_type(&encode(bytes)), kind, "{bytes:?}");
        }
        assert_eq!(image_type("not base64 at all!"), None);
        assert!(is_pdf(&encode(b"%PDF-1.7\n")));
        assert!(!is_pdf(&encode(b"\x89PNG\r\n\x1a\n")));
    }

    #[test]
    fn an_images_size_is_read_from_its_header() {
        let png = |w: u32, h: u32| {
            let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
            bytes.extend(w.to_be_bytes());
            bytes.extend(h.to_be_bytes());
            bytes.extend([8, 6, 0, 0, 0]);
            encode(&bytes)
        };
        assert_eq!(image_size(&png(4832, 2756)), Some((4832, 2756)));
        let gif = encode(b"GIF89a\x40\x01\xf0\x00\0\0");
        assert_eq!(image_size(&gif), Some((320, 240)));
        // JPEG: an APP0 segment, then a baseline frame of 3000 x 2000.
        let mut jpeg =
            b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00".to_vec();
        jpeg.extend(b"\xff\xc0\x00\x11\x08\x07\xd0\x0b\xb8\x03\x01\x22\x00");
        assert_eq!(image_size(&encode(&jpeg)), Some((3000, 2000)));
        // Metadata of 300 KB before the frame (EXIF with a thumbnail, several segments):
        // stepped over, not decoded.
        let mut exif = b"\xff\xd8".to_vec();
        for _ in 0..5 {
            exif.extend(b"\xff\xe1\xea\x60");
            exif.extend(std::iter::repeat_n(0x41, 0xea60 - 2));
        }
        exif.extend(b"\xff\xc2\x00\x11\x08\x0b\x40\x13\x40\x03\x01\x22\x00");
        assert_eq!(image_size(&encode(&exif)), Some((4928, 2880)));
        let mut webp = b"RIFF\x30\0\0\0WEBPVP8X\x0a\0\0\0\0\0\0\0".to_vec();
        webp.extend([0x9f, 0x0f, 0x00, 0xff, 0x07, 0x00]);
        assert_eq!(image_size(&encode(&webp)), Some((4000, 2048)));
        assert_eq!(image_size(&encode(b"\xff\xd8\xff")), None);
        assert_eq!(image_size("AA=="), None);
    }

    #[test]
    fn gemini_takes_png_jpeg_webp_heic_and_heif_but_not_gif() {
        let cases: [(&[u8], Option<&str>); 6] = [
            (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", Some("image/png")),
            (b"\xff\xd8\xff\xe0\0\x10JFIF", Some("image/jpeg")),
            (b"\0\0\0\x18ftypheic\0\0", Some("image/heic")),
            (b"\0\0\0\x18ftypmif1\0\0", Some("image/heif")),
            (b"GIF89a\x01\0\x01\0", None),
            (b"BM\x36\x00\x0c\x00\0\0\0\0", None),
        ];
        for (bytes, kind) in cases {
            assert_eq!(gemini_image_type(&encode(bytes)), kind, "{bytes:?}");
        }
    }

    #[test]
    fn openai_gets_a_data_url_under_the_type_the_bytes_are() {
        let jpeg = encode(b"\xff\xd8\xff\xe0\0\x10JFIF");
        let source = serde_json::json!({"type": "base64", "media_type": "image/png", "data": jpeg});
        let url = openai_image_url(&source).expect("an image");
        assert_eq!(url, format!("data:image/jpeg;base64,{jpeg}"));
        assert_eq!(image_url_fault(&url), None);
        let heic = encode(b"\0\0\0\x18ftypheic\0\0");
        let source =
            serde_json::json!({"type": "base64", "media_type": "image/heic", "data": heic});
        assert_eq!(openai_image_url(&source), None);
        assert!(image_url_fault(&format!("data:image/heic;base64,{heic}")).is_some());
        assert_eq!(image_url_fault("https://example.com/a.heic"), None);
    }

    /// A GIF of `frames` frames of 1 x 1 pixel, with a global colour table, a looping
    /// extension and a control extension before each frame, as animations are written.
    fn gif(frames: usize) -> Vec<u8> {
        let mut bytes = b"GIF89a\x01\x00\x01\x00\x80\x00\x00".to_vec();
        bytes.extend([0, 0, 0, 0xff, 0xff, 0xff]);
        bytes.extend(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00");
        for _ in 0..frames {
            bytes.extend(b"\x21\xf9\x04\x04\x0a\x00\x00\x00");
            bytes.extend(b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00");
            bytes.extend(b"\x02\x02\x44\x01\x00");
        }
        bytes.push(0x3b);
        bytes
    }

    #[test]
    fn openai_gets_a_still_gif_and_an_animated_one_is_described() {
        assert_eq!(gif_frames(&encode(&gif(1)), 2), 1);
        assert_eq!(gif_frames(&encode(&gif(5)), 2), 2);
        assert_eq!(gif_frames(&encode(&gif(5)), 10), 5);
        let still = serde_json::json!({"type": "base64", "media_type": "image/gif", "data": encode(&gif(1))});
        let url = openai_image_url(&still).expect("a still GIF");
        assert_eq!(image_url_fault(&url), None);
        let animated = encode(&gif(3));
        let source =
            serde_json::json!({"type": "base64", "media_type": "image/gif", "data": animated});
        assert_eq!(openai_image_url(&source), None);
        assert_eq!(
            image_url_fault(&format!("data:image/gif;base64,{animated}")),
            Some("an animated GIF (OpenAI takes still GIFs only)")
        );
        // A frame in a local colour table, after a comment: still counted.
        let mut local = gif(1);
        local.pop();
        local.extend(b"\x21\xfe\x02hi\x00");
        local.extend(b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x81");
        local.extend([0; 12]);
        local.extend(b"\x02\x02\x44\x01\x00\x3b");
        assert_eq!(gif_frames(&encode(&local), 10), 2);
        // Cut short, or only a header: what was read is counted, and the image stays a GIF.
        let cut = gif(2);
        assert_eq!(gif_frames(&encode(&cut[..cut.len() - 20]), 10), 1);
        assert_eq!(gif_frames(&encode(b"GIF89a\x01\0\x01\0"), 10), 0);
        assert!(openai_image_url(
            &serde_json::json!({"type": "base64", "data": encode(b"GIF89a\x01\0\x01\0")})
        )
        .is_some());
    }
}
