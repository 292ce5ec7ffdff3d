//! The preload's two records on stderr: its gate ([`GATE_RECORD`]) and the tool's end.
//!
//! The tool's end as the preload reports it (`runtime/harden.cjs`, 8): once Node has run
//! its last 'exit' listener, the preload writes [`END_RECORD`], the exit code and a newline
//! to stderr and exits. The runner takes the record off the stream and has the tool's code
//! and every byte it wrote before Node has freed its heap and the kernel its memory: at a
//! natural end Node's event loop ran until no write to the pipes was pending, and after
//! `process.exit()` a write still pending is never done, with the record or without it.
//!
//! The record is no secret from the tool: a tool that writes it ends its own job with the
//! code it names, which `process.exit()` does as well. A NUL starts it, so no text a tool
//! prints by chance (the preload's own source included, which spells it as an escape)
//! holds it.

/// What starts the record; 1 to 3 decimal digits (at most 255) and `\n` follow.
pub const END_RECORD: &[u8] = b"\0openvibe-skill-runner:end:";

/// What the preload writes to stderr at its gate, before it reads the go byte
/// (`runtime/harden.cjs`, 7): Node's start is done. A warm sandbox is ready only then.
/// No code of the tool has run before it, so the first one on the stream is the
/// preload's; the runner takes it off, and looks for no other.
pub const GATE_RECORD: &[u8] = b"\0openvibe-skill-runner:gate\n";

/// How much of stderr may come before [`GATE_RECORD`] (what Node itself prints at its
/// start: a warning of an older Node's, say). Past it the record is looked for no more.
pub const BEFORE_GATE_MAX: usize = 64 * 1024;

/// Finds [`GATE_RECORD`] at the start of stderr, chunk by chunk, and takes it off.
#[derive(Debug, Default)]
pub struct GateScan {
    seen: Vec<u8>,
}

/// What [`GateScan::feed`] found once it knows.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// The record came: the bytes before and after it, which are stderr.
    Reached(Vec<u8>),
    /// More than [`BEFORE_GATE_MAX`] bytes came without it: the bytes, which are stderr.
    Missed(Vec<u8>),
}

impl GateScan {
    /// Takes the next chunk read from stderr; none while the record may still come (the
    /// bytes so far held).
    pub fn feed(&mut self, chunk: &[u8]) -> Option<Gate> {
        self.seen.extend_from_slice(chunk);
        if let Some(at) = memchr::memmem::find(&self.seen, GATE_RECORD) {
            let mut bytes = std::mem::take(&mut self.seen);
            bytes.drain(at..at + GATE_RECORD.len());
            return Some(Gate::Reached(bytes));
        }
        if self.seen.len() > BEFORE_GATE_MAX {
            return Some(Gate::Missed(std::mem::take(&mut self.seen)));
        }
        None
    }

    /// At the end of the stream: what was held is stderr.
    pub fn finish(self) -> Vec<u8> {
        self.seen
    }
}

/// Finds the record in stderr as it arrives, chunk by chunk: a record may be split
/// anywhere between two reads, so what could be its beginning is held back until the next
/// chunk tells.
#[derive(Debug, Default)]
pub struct EndScan {
    held: Vec<u8>,
}

/// What follows [`END_RECORD`] in the bytes seen so far.
enum Code {
    /// A whole record: its code.
    Whole(u8),
    /// Digits so far, or nothing yet: the next chunk tells.
    Incomplete,
    /// Not a record.
    Not,
}

fn code_after(rest: &[u8]) -> Code {
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 3 {
        return Code::Not;
    }
    match rest.get(digits) {
        None => Code::Incomplete,
        Some(b'\n') if digits > 0 => std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse::<u8>().ok())
            .map_or(Code::Not, Code::Whole),
        Some(_) => Code::Not,
    }
}

/// The length of the longest end of `bytes` that begins [`END_RECORD`] without being all
/// of it.
fn held_back(bytes: &[u8]) -> usize {
    (1..END_RECORD.len().min(bytes.len() + 1))
        .rev()
        .find(|&k| bytes.ends_with(&END_RECORD[..k]))
        .unwrap_or(0)
}

impl EndScan {
    /// Takes the next chunk read from stderr. Returns the bytes that are the tool's stderr
    /// (the record taken out) and, once a whole record has come, its code: what follows a
    /// record is not looked at, the tool has ended.
    pub fn feed(&mut self, chunk: &[u8]) -> (Vec<u8>, Option<u8>) {
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(chunk);
        let mut out = Vec::with_capacity(buf.len());
        let mut from = 0;
        loop {
            let Some(at) = memchr::memmem::find(&buf[from..], END_RECORD).map(|i| from + i) else {
                let tail = &buf[from..];
                let keep = tail.len() - held_back(tail);
                out.extend_from_slice(&tail[..keep]);
                self.held = tail[keep..].to_vec();
                return (out, None);
            };
            out.extend_from_slice(&buf[from..at]);
            match code_after(&buf[at + END_RECORD.len()..]) {
                Code::Whole(code) => return (out, Some(code)),
                Code::Incomplete => {
                    self.held = buf[at..].to_vec();
                    return (out, None);
                }
                Code::Not => {
                    // Its NUL is the tool's; the search goes on after it.
                    out.push(buf[at]);
                    from = at + 1;
                }
            }
        }
    }

    /// At the end of the stream: what was held back is stderr after all.
    pub fn finish(self) -> Vec<u8> {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(code: &str) -> Vec<u8> {
        let mut r = END_RECORD.to_vec();
        r.extend_from_slice(code.as_bytes());
        r.push(b'\n');
        r
    }

    /// Feeds `stream` cut at each of `cuts`; the stderr kept and the code found.
    fn scan(stream: &[u8], cuts: &[usize]) -> (Vec<u8>, Option<u8>) {
        let mut scan = EndScan::default();
        let mut kept = Vec::new();
        let mut last = 0;
        for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
            let (bytes, code) = scan.feed(&stream[last..cut]);
            kept.extend_from_slice(&bytes);
            if code.is_some() {
                return (kept, code);
            }
            last = cut;
        }
        kept.extend_from_slice(&scan.finish());
        (kept, None)
    }

    #[test]
    fn the_record_is_taken_off_the_stream_wherever_the_reads_cut_it() {
        let mut stream = b"warning: half a line".to_vec();
        stream.extend_from_slice(&record("42"));
        stream.extend_from_slice(b"never seen");
        let end = stream.len() - b"never seen".len();
        for a in 0..=end {
            for b in a..=end {
                let (kept, code) = scan(&stream, &[a, b]);
                assert_eq!(code, Some(42), "cut at {a} and {b}");
                assert_eq!(kept, b"warning: half a line", "cut at {a} and {b}");
            }
        }
    }

    #[test]
    fn every_code_node_can_end_with_is_read() {
        for code in [0u8, 1, 7, 13, 99, 100, 255] {
            assert_eq!(
                scan(&record(&code.to_string()), &[]),
                (Vec::new(), Some(code))
            );
        }
    }

    #[test]
    fn what_is_not_a_whole_record_stays_stderr() {
        for text in [
            record("256"),
            record("1000"),
            record(""),
            record("-1"),
            record("4x"),
            [END_RECORD, b"7"].concat(),
            END_RECORD[..END_RECORD.len() - 1].to_vec(),
            b"openvibe-skill-runner:end:0\n".to_vec(),
            b"\0\0\0".to_vec(),
        ] {
            for cut in 0..=text.len() {
                assert_eq!(
                    scan(&text, &[cut]),
                    (text.clone(), None),
                    "{text:?} cut at {cut}"
                );
            }
        }
    }

    /// What the stream means read whole, the plain way: the first place a whole record
    /// starts, or none.
    fn read_whole(stream: &[u8]) -> (Vec<u8>, Option<u8>) {
        for at in 0..stream.len() {
            if let Some(rest) = stream[at..].strip_prefix(END_RECORD) {
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                let code = std::str::from_utf8(&rest[..digits])
                    .ok()
                    .filter(|d| (1..=3).contains(&d.len()))
                    .and_then(|d| d.parse::<u8>().ok());
                if let (Some(code), Some(b'\n')) = (code, rest.get(digits)) {
                    return (stream[..at].to_vec(), Some(code));
                }
            }
        }
        (stream.to_vec(), None)
    }

    #[test]
    fn streams_of_record_pieces_cut_anywhere_read_as_the_whole_stream_does() {
        // A fixed xorshift: the same streams on every run.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let pieces: [&[u8]; 9] = [
            END_RECORD,
            &END_RECORD[..5],
            &END_RECORD[5..],
            b"\0",
            b"1",
            b"25",
            b"6",
            b"\n",
            b"text ",
        ];
        for _ in 0..3000 {
            let mut stream = Vec::new();
            for _ in 0..next(12) {
                stream.extend_from_slice(pieces[next(pieces.len())]);
            }
            let mut cuts: Vec<usize> = (0..next(4)).map(|_| next(stream.len() + 1)).collect();
            cuts.sort_unstable();
            assert_eq!(
                scan(&stream, &cuts),
                read_whole(&stream),
                "{stream:?} cut at {cuts:?}"
            );
        }
    }

    #[test]
    fn a_record_after_a_false_start_is_found() {
        let mut stream = [END_RECORD, b"x"].concat();
        stream.extend_from_slice(b"\0\0");
        stream.extend_from_slice(&record("3"));
        let before = stream.len() - record("3").len();
        for cut in 0..stream.len() {
            let (kept, code) = scan(&stream, &[cut]);
            assert_eq!(code, Some(3), "cut at {cut}");
            assert_eq!(kept, &stream[..before], "cut at {cut}");
        }
    }

    /// The gate record is taken off wherever the reads cut it, what Node wrote before it
    /// and the tool after it stay stderr, and a tool's later copy of it is its own stderr.
    #[test]
    fn the_gate_record_is_taken_off_once_wherever_the_reads_cut_it() {
        let stream = [
            b"(node) warning\n".as_slice(),
            GATE_RECORD,
            b"tool",
            GATE_RECORD,
        ]
        .concat();
        let want = [b"(node) warning\n".as_slice(), b"tool", GATE_RECORD].concat();
        for cut in 0..=stream.len() {
            let mut g = GateScan::default();
            // What the scan gives, then what it was never fed (it is done at the record).
            let (found, unfed) = match g.feed(&stream[..cut]) {
                Some(found) => (found, &stream[cut..]),
                None => (g.feed(&stream[cut..]).expect("the record"), &[][..]),
            };
            match found {
                Gate::Reached(bytes) => {
                    assert_eq!([bytes.as_slice(), unfed].concat(), want, "cut at {cut}")
                }
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn without_the_gate_record_stderr_is_given_whole() {
        let mut g = GateScan::default();
        assert_eq!(g.feed(b"\0openvibe-skill-runner:ga"), None);
        assert_eq!(g.finish(), b"\0openvibe-skill-runner:ga");
        let mut g = GateScan::default();
        let long = vec![b'w'; BEFORE_GATE_MAX];
        assert_eq!(g.feed(&long), None);
        assert_eq!(
            g.feed(b"!"),
            Some(Gate::Missed([long.as_slice(), b"!"].concat()))
        );
    }
}
