//! JSON bodies on the errors the HTTP parser answers by itself.
//!
//! When a request cannot be parsed, hyper answers before any of our layers see it, with
//! an empty body: 400 (a malformed request line or header), 414 (a URI over its limit)
//! or 431 (headers over its buffer, or more than 100 of them), each
//! `connection: close` and `content-length: 0`. Every other error of the server has a
//! JSON body `{"error": {"field", "message"}}`, and clients rely on it.
//!
//! [`JsonParserErrors`] wraps a connection's socket and rewrites exactly that answer on
//! its way out: a write that is one whole response head with one of those statuses,
//! `connection: close` and `content-length: 0`. The application never writes such a
//! head (its errors all carry JSON), so nothing else is touched. The wrapper reports
//! no vectored writes, so hyper hands each response head over in one buffer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use arlbook_core::FieldError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The parser's statuses, with what each means for the client.
const PARSER_ERRORS: &[(&str, &str)] = &[
    (
        "400",
        "the request could not be parsed as HTTP/1.1 (a malformed request line or header)",
    ),
    ("414", "the request's URI is longer than the server accepts"),
    (
        "431",
        "the request's headers are larger than the server accepts (about 400 KiB, and \
         100 headers at most)",
    ),
];

/// The JSON answer that replaces `head`, if `head` is the parser's own error answer.
pub fn rewrite(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let headers = text.strip_suffix("\r\n\r\n")?;
    if headers.contains("\r\n\r\n") {
        return None;
    }
    let mut lines = headers.split("\r\n");
    let status_line = lines.next()?;
    let status = status_line.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let (_, message) = PARSER_ERRORS.iter().find(|(code, _)| *code == status)?;
    let mut closes = false;
    let mut empty = false;
    let mut kept = Vec::new();
    for line in lines {
        let lower = line.to_ascii_lowercase();
        match lower.as_str() {
            "connection: close" => closes = true,
            "content-length: 0" => empty = true,
            _ if lower.starts_with("date:") => kept.push(line),
            // Anything else means this is not the parser's bare answer.
            _ => return None,
        }
    }
    if !(closes && empty) {
        return None;
    }
    let body = serde_json::json!({ "error": FieldError::new("(request)", *message) }).to_string();
    let mut answer = format!(
        "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for line in kept {
        answer.push_str(line);
        answer.push_str("\r\n");
    }
    answer.push_str("\r\n");
    answer.push_str(&body);
    Some(answer.into_bytes())
}

/// A rewritten answer being written, and the length of the write it stands for.
struct Pending {
    bytes: Vec<u8>,
    written: usize,
    replaces: usize,
}

/// A socket whose parser-error answers get JSON bodies (see the module docs).
pub struct JsonParserErrors<S> {
    inner: S,
    pending: Option<Pending>,
}

impl<S> JsonParserErrors<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonParserErrors<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonParserErrors<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // A write that returned Pending is repeated with the same buffer, so a pending
        // rewrite is the answer to this call too.
        if this.pending.is_none() {
            match rewrite(buf) {
                Some(bytes) => {
                    this.pending = Some(Pending {
                        bytes,
                        written: 0,
                        replaces: buf.len(),
                    });
                }
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        while let Some(pending) = &mut this.pending {
            if pending.written == pending.bytes.len() {
                let replaced = pending.replaces;
                this.pending = None;
                return Poll::Ready(Ok(replaced));
            }
            let written =
                ready!(Pin::new(&mut this.inner).poll_write(cx, &pending.bytes[pending.written..]));
            match written {
                Ok(0) => {
                    this.pending = None;
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => pending.written += n,
                Err(e) => {
                    this.pending = None;
                    return Poll::Ready(Err(e));
                }
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYPER_431: &str = "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 22:43:05 GMT\r\n\r\n";

    fn split(answer: &[u8]) -> (String, serde_json::Value) {
        let text = String::from_utf8(answer.to_vec()).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.to_owned(), serde_json::from_str(body).unwrap())
    }

    #[test]
    fn the_parsers_answers_get_a_json_body_of_the_stated_length() {
        for (code, reason) in [
            ("400", "Bad Request"),
            ("414", "URI Too Long"),
            ("431", "Request Header Fields Too Large"),
        ] {
            let head = HYPER_431.replace(
                "431 Request Header Fields Too Large",
                &format!("{code} {reason}"),
            );
            let answer = rewrite(head.as_bytes()).unwrap_or_else(|| panic!("{code} kept"));
            let (head, body) = split(&answer);
            assert!(head.starts_with(&format!("HTTP/1.1 {code} {reason}\r\n")));
            assert!(head.contains("content-type: application/json"));
            assert!(head.contains("date: Tue, 01 Dec 2026"));
            assert_eq!(body["error"]["field"], "(request)");
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(length, body.to_string().len());
        }
    }

    #[test]
    fn other_answers_are_left_alone() {
        let kept = [
            // Our own errors carry a body and a content type.
            "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n",
            // Other statuses, and answers that keep the connection.
            "HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n",
            "HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            // A head followed by bytes of a body.
            "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\ncontent-length: 0\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
            "",
        ];
        for head in kept {
            assert!(rewrite(head.as_bytes()).is_none(), "{head:?} rewritten");
        }
        assert!(rewrite(&[0xff, 0xfe]).is_none());
    }

    #[tokio::test]
    async fn the_socket_writes_the_rewrite_and_reports_the_original_length() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, server) = tokio::io::duplex(64);
        let mut wrapped = JsonParserErrors::new(server);
        let reader = tokio::spawn(async move {
            let mut client = client;
            let mut all = Vec::new();
            client.read_to_end(&mut all).await.unwrap();
            all
        });
        // A buffer of 64 bytes forces the rewrite out in several writes.
        let written = wrapped.write(HYPER_431.as_bytes()).await.unwrap();
        assert_eq!(written, HYPER_431.len());
        wrapped.shutdown().await.unwrap();
        drop(wrapped);
        let (_, body) = split(&reader.await.unwrap());
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("headers")
        );
    }
}
