//! Streaming a GGUF file into per-tensor buffers without ever holding the file twice.
//!
//! The header is read as it streams by (`HeaderStream`, the crate's one header reader, in full
//! mode: no buffer of the header's bytes, only one partial item at a time). Then, and only
//! after the caller has had the chance to look at the header and refuse the load
//! (`LoadProgress::HeaderReady`), each tensor gets its own buffer of exactly its size, and chunk
//! bytes are copied straight into it; alignment padding and gaps are skipped. A tensor's buffer
//! is allocated when its first byte arrives, so memory is committed only as fast as real bytes
//! back it. The one copy outside the tensors is the rest of the chunk the header ended in, held
//! from `HeaderReady` until the header is accepted.

use super::error::GgufError;
use super::store::TensorStore;
use super::stream::{HeaderStream, Keep, StreamStatus};
use super::types::GgufHeader;

/// What a `push` achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadProgress {
    /// Still reading the header: the stream must reach at least `total_bytes_needed` bytes.
    Header { bytes_received: u64, total_bytes_needed: u64 },
    /// The header has just been parsed and validated (see `StreamLoader::header`). No tensor
    /// memory is allocated yet: this is the moment to check a memory budget and drop the
    /// loader to refuse. The next `push`, `accept_header` or `finish` starts allocating.
    HeaderReady,
    /// Tensor data is arriving; `data_end` is the file offset where the last tensor ends.
    Data { bytes_received: u64, data_end: u64 },
    /// Every tensor's bytes have arrived; anything more is trailing padding.
    Complete { bytes_received: u64 },
}

/// Where the tensor bytes go once the header is accepted.
struct DataSink {
    header: GgufHeader,
    /// `buffers[i]` for `header.tensors[i]`; empty (no capacity) until its first byte arrives.
    buffers: Vec<Vec<u8>>,
    /// Tensor indices in data-section order, so one forward pass fills them all.
    order: Vec<usize>,
    /// First entry of `order` whose tensor is still incomplete.
    next: usize,
    allocated: u64,
    /// `header.data_end()`: a stream shorter than this is truncated, even when the tensors
    /// ending there are empty.
    data_end: u64,
}

impl DataSink {
    fn new(header: GgufHeader) -> DataSink {
        let mut order: Vec<usize> = (0..header.tensors.len()).collect();
        order.sort_by_key(|&i| (header.tensors[i].offset, header.tensors[i].n_bytes()));
        let buffers = header.tensors.iter().map(|_| Vec::new()).collect();
        let data_end = header.data_end();
        DataSink { header, buffers, order, next: 0, allocated: 0, data_end }
    }

    /// Every tensor is filled and the stream reached the end of the last one.
    fn is_complete(&mut self, received: u64) -> bool {
        self.skip_finished();
        self.next == self.order.len() && received >= self.data_end
    }

    fn skip_finished(&mut self) {
        while let Some(&i) = self.order.get(self.next) {
            if (self.buffers[i].len() as u64) < self.header.tensors[i].n_bytes() {
                break;
            }
            self.next += 1;
        }
    }

    /// Copies the tensor bytes in `chunk`, which starts at absolute file offset `at`.
    fn absorb(&mut self, mut chunk: &[u8], mut at: u64) -> Result<(), GgufError> {
        loop {
            self.skip_finished();
            let Some(&i) = self.order.get(self.next) else { return Ok(()) };
            if chunk.is_empty() {
                return Ok(());
            }
            let t = &self.header.tensors[i];
            let total = t.n_bytes();
            let buf = &mut self.buffers[i];
            let want = self.header.data_offset + t.offset + buf.len() as u64;
            if at < want {
                // Padding, or a gap the file leaves between tensors.
                let skip = (want - at).min(chunk.len() as u64) as usize;
                chunk = &chunk[skip..];
                at += skip as u64;
                continue;
            }
            // Tensors are sorted and validated not to overlap, so the stream never passes
            // the next tensor's next byte without it being consumed.
            debug_assert_eq!(at, want);
            if buf.capacity() == 0 {
                let alloc_failed = GgufError::AllocFailed { bytes: total };
                let n = usize::try_from(total).map_err(|_| alloc_failed.clone())?;
                buf.try_reserve_exact(n).map_err(|_| alloc_failed)?;
                self.allocated += total;
            }
            let n = ((total - buf.len() as u64) as usize).min(chunk.len());
            buf.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
            at += n as u64;
        }
    }
}

enum Phase {
    Header(HeaderStream<()>),
    /// Header parsed; `tail` holds the bytes that arrived after it, from file offset `tail_at`.
    Ready {
        header: GgufHeader,
        tail: Vec<u8>,
        tail_at: u64,
    },
    Data(DataSink),
    Failed(GgufError),
}

/// Turns a GGUF byte stream, pushed chunk by chunk, into a `TensorStore`.
pub struct StreamLoader {
    expected_len: Option<u64>,
    received: u64,
    phase: Phase,
}

impl StreamLoader {
    /// `expected_total_len`: the file's length when known (Content-Length, `File.size`), which
    /// lets a header that claims more data than the file holds fail before any download. With
    /// `None` the header's tensor sizes cannot be checked against the file: the caller's budget
    /// check at `HeaderReady` is then the only gate, and an allocation the allocator refuses
    /// is `GGUF_ALLOC_FAILED` rather than an abort.
    pub fn new(expected_total_len: Option<u64>) -> StreamLoader {
        StreamLoader {
            expected_len: expected_total_len,
            received: 0,
            phase: Phase::Header(HeaderStream::new(Keep::ALL, ())),
        }
    }

    /// Feeds the next chunk of the file. After an error the loader stays failed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<LoadProgress, GgufError> {
        if let Phase::Failed(e) = &self.phase {
            return Err(e.clone());
        }
        let r = self.push_inner(chunk);
        if let Err(e) = &r {
            self.phase = Phase::Failed(e.clone());
        }
        r
    }

    fn push_inner(&mut self, chunk: &[u8]) -> Result<LoadProgress, GgufError> {
        let start = self.received;
        let received = start + chunk.len() as u64;
        if let Some(expected) = self.expected_len.filter(|&e| received > e) {
            return Err(GgufError::StreamTooLong { expected, received });
        }
        self.received = received;
        if let Phase::Header(stream) = &mut self.phase {
            match stream.push(chunk)? {
                StreamStatus::NeedMore { .. } => {
                    let total_bytes_needed = stream.bytes_needed();
                    if let Some(e) = self.expected_len.filter(|&e| total_bytes_needed > e) {
                        return Err(GgufError::Truncated {
                            needed: total_bytes_needed,
                            available: e,
                        });
                    }
                    return Ok(LoadProgress::Header {
                        bytes_received: received,
                        total_bytes_needed,
                    });
                }
                StreamStatus::Complete { header_len } => {
                    let stream = std::mem::replace(stream, HeaderStream::new(Keep::ALL, ()));
                    let (header, _, ()) = stream.finish(self.expected_len)?;
                    // The header ends inside this chunk (the reader would have said so at the
                    // previous one otherwise).
                    let tail = chunk[(header_len - start) as usize..].to_vec();
                    self.phase = Phase::Ready { header, tail, tail_at: header_len };
                    return Ok(LoadProgress::HeaderReady);
                }
            }
        }
        self.accept_header()?;
        let Phase::Data(sink) = &mut self.phase else {
            unreachable!("accept_header leaves the loader in Data or Failed, and Failed returned")
        };
        sink.absorb(chunk, start)?;
        Ok(self.data_progress())
    }

    fn data_progress(&mut self) -> LoadProgress {
        let bytes_received = self.received;
        match &mut self.phase {
            Phase::Data(sink) => {
                if sink.is_complete(bytes_received) {
                    LoadProgress::Complete { bytes_received }
                } else {
                    LoadProgress::Data { bytes_received, data_end: sink.data_end }
                }
            }
            _ => LoadProgress::HeaderReady,
        }
    }

    /// Starts the data phase after `HeaderReady` (pushing more bytes does so implicitly):
    /// tensor bytes that arrived with the header's last chunk go into their buffers. Does
    /// nothing before the header is complete or once it has been accepted.
    pub fn accept_header(&mut self) -> Result<(), GgufError> {
        match std::mem::replace(&mut self.phase, Phase::Failed(placeholder())) {
            Phase::Ready { header, tail, tail_at } => {
                let mut sink = DataSink::new(header);
                let r = sink.absorb(&tail, tail_at);
                drop(tail);
                match r {
                    Ok(()) => self.phase = Phase::Data(sink),
                    Err(e) => {
                        self.phase = Phase::Failed(e.clone());
                        return Err(e);
                    }
                }
            }
            Phase::Failed(e) => {
                self.phase = Phase::Failed(e.clone());
                return Err(e);
            }
            other => self.phase = other,
        }
        Ok(())
    }

    /// The header, once parsed.
    pub fn header(&self) -> Option<&GgufHeader> {
        match &self.phase {
            Phase::Ready { header, .. } => Some(header),
            Phase::Data(sink) => Some(&sink.header),
            _ => None,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_received(&self) -> u64 {
        self.received
    }

    /// Bytes allocated for tensor buffers so far (0 until the header is accepted).
    pub fn bytes_allocated(&self) -> u64 {
        match &self.phase {
            Phase::Data(sink) => sink.allocated,
            _ => 0,
        }
    }

    /// Ends the stream: every tensor (and, when a length was announced, every byte) must have
    /// arrived, or the result is `GGUF_TRUNCATED`.
    pub fn finish(mut self) -> Result<TensorStore, GgufError> {
        if let Phase::Header(stream) = &self.phase {
            return Err(GgufError::Truncated {
                needed: stream.bytes_needed().max(self.received + 1),
                available: self.received,
            });
        }
        self.accept_header()?;
        let received = self.received;
        let Phase::Data(mut sink) = self.phase else {
            unreachable!("accept_header leaves the loader in Data or returns an error")
        };
        if !sink.is_complete(received) {
            return Err(GgufError::Truncated { needed: sink.data_end, available: received });
        }
        if let Some(e) = self.expected_len.filter(|&e| received < e) {
            return Err(GgufError::Truncated { needed: e, available: received });
        }
        Ok(TensorStore::new(sink.header, sink.buffers))
    }
}

/// Stands in for the phase while `accept_header` moves it out.
fn placeholder() -> GgufError {
    GgufError::Truncated { needed: 0, available: 0 }
}

/// Loads a whole file already in memory (tests, small models). It is pushed in chunks of
/// `PUSH_CHUNK` so the rest of the chunk the header ends in, which the loader holds until the
/// header is accepted, stays small beside the file.
pub fn load_bytes(file: &[u8]) -> Result<TensorStore, GgufError> {
    const PUSH_CHUNK: usize = 1 << 20;
    let mut loader = StreamLoader::new(Some(file.len() as u64));
    for chunk in file.chunks(PUSH_CHUNK) {
        loader.push(chunk)?;
    }
    loader.finish()
}
