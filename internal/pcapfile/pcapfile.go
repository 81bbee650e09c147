// Package pcapfile reads and writes classic pcap files (libpcap's format,
// not pcapng): the capture stream of `netfwd ctl capture` and the inputs
// and outputs of `netfwd replay`.
//
// Why not gopacket's pcapgo, which shared/design.md names for pcap I/O:
// pcapgo imports gopacket/layers, whose package initialisation fills its
// protocol tables (466 kB, 19-25 ms of CPU on the 2-vCPU test VMs) in
// every start of the netfwd binary: each `ctl` call, and each hot
// restart's `netfwd restart` and successor, which start beside a running
// datapath (docs/performance.md). The format is two fixed headers; the
// tests check this package against pcapgo both ways with random inputs,
// so gopacket stays the reference, in the tests.
//
// Format (https://www.tcpdump.org/manual/pcap-savefile.html): a 24-byte
// file header (magic, version 2.4, snaplen, link type) and per frame a
// 16-byte record header (seconds, micro- or nanoseconds, captured length,
// original length), all in the writer's byte order, which the magic tells.
// Reader also takes gzip-compressed files, as pcapgo does.
package pcapfile

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// LinkTypeEthernet is DLT_EN10MB, the only link type netfwd writes or reads.
const LinkTypeEthernet = 1

// MaxSnaplen bounds the captured length of one record the Reader accepts
// (libpcap's MAXIMUM_SNAPLEN): a corrupt length never sizes an allocation.
const MaxSnaplen = 262144

const (
	magicMicros = 0xa1b2c3d4
	magicNanos  = 0xa1b23c4d
	fileHeader  = 24
	recHeader   = 16
)

// Writer writes a pcap stream with microsecond timestamps, little-endian
// (what pcapgo.NewWriter and tcpdump on x86 write).
type Writer struct {
	w       io.Writer
	snaplen uint32
	buf     [recHeader]byte
}

// NewWriter writes the file header for Ethernet frames of up to snaplen
// bytes and returns the writer of the records.
func NewWriter(w io.Writer, snaplen uint32) (*Writer, error) {
	var h [fileHeader]byte
	binary.LittleEndian.PutUint32(h[0:4], magicMicros)
	binary.LittleEndian.PutUint16(h[4:6], 2)
	binary.LittleEndian.PutUint16(h[6:8], 4)
	binary.LittleEndian.PutUint32(h[16:20], snaplen)
	binary.LittleEndian.PutUint32(h[20:24], LinkTypeEthernet)
	if _, err := w.Write(h[:]); err != nil {
		return nil, err
	}
	return &Writer{w: w, snaplen: snaplen}, nil
}

// WritePacket writes one record: data as captured, origLen the frame's
// length on the wire (>= len(data)). A record longer than the file's
// snap length is refused: the caller truncates, as libpcap does.
func (w *Writer) WritePacket(ts time.Time, data []byte, origLen int) error {
	if origLen < len(data) {
		return fmt.Errorf("pcap: captured length %d exceeds the original length %d", len(data), origLen)
	}
	if uint32(len(data)) > w.snaplen {
		return fmt.Errorf("pcap: captured length %d exceeds the snap length %d", len(data), w.snaplen)
	}
	if ts.IsZero() {
		ts = time.Now() // as pcapgo does: a zero time has no 32-bit seconds
	}
	binary.LittleEndian.PutUint32(w.buf[0:4], uint32(ts.Unix()))
	binary.LittleEndian.PutUint32(w.buf[4:8], uint32(ts.Nanosecond()/1000))
	binary.LittleEndian.PutUint32(w.buf[8:12], uint32(len(data)))
	binary.LittleEndian.PutUint32(w.buf[12:16], uint32(origLen))
	if _, err := w.w.Write(w.buf[:]); err != nil {
		return err
	}
	_, err := w.w.Write(data)
	return err
}

// Reader reads a pcap stream.
type Reader struct {
	r        io.Reader
	order    binary.ByteOrder
	nsFactor int64 // 1000 for microsecond files, 1 for nanosecond ones
	snaplen  uint32
	linkType uint32
	buf      [recHeader]byte
}

// NewReader reads the file header (of a plain or gzip-compressed file).
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	rd := &Reader{r: br}
	if m, err := br.Peek(2); err == nil && m[0] == 0x1f && m[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		rd.r = z
	}
	var h [fileHeader]byte
	if _, err := io.ReadFull(rd.r, h[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("pcap file header: %w", err)
	}
	// The magic in the writer's byte order tells that order and the
	// timestamps' unit.
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		switch order.Uint32(h[0:4]) {
		case magicMicros:
			rd.order, rd.nsFactor = order, 1000
		case magicNanos:
			rd.order, rd.nsFactor = order, 1
		}
	}
	if rd.order == nil {
		return nil, fmt.Errorf("not a pcap file (magic %x; pcapng is not read)", h[0:4])
	}
	if major, minor := rd.order.Uint16(h[4:6]), rd.order.Uint16(h[6:8]); major != 2 || minor != 4 {
		return nil, fmt.Errorf("pcap version %d.%d, want 2.4", major, minor)
	}
	rd.snaplen = rd.order.Uint32(h[16:20])
	rd.linkType = rd.order.Uint32(h[20:24]) & 0x0fffffff // the top bits carry FCS flags
	return rd, nil
}

// LinkType is the file's link type (LinkTypeEthernet for Ethernet).
func (r *Reader) LinkType() uint32 { return r.linkType }

// Snaplen is the file header's snapshot length.
func (r *Reader) Snaplen() uint32 { return r.snaplen }

// ReadPacket reads the next record: its captured bytes (a new slice), its
// timestamp (UTC) and the frame's original length. io.EOF at a clean end;
// a record cut short is io.ErrUnexpectedEOF.
//
// A record longer than the file's snap length is read whole, up to
// MaxSnaplen (pcapgo refuses it; libpcap reads it): some writers (dpkt's
// default snaplen of 1500, for one) do not truncate to their own header.
func (r *Reader) ReadPacket() (data []byte, ts time.Time, origLen int, err error) {
	if _, err = io.ReadFull(r.r, r.buf[:]); err != nil {
		return nil, time.Time{}, 0, err
	}
	sec, frac := r.order.Uint32(r.buf[0:4]), r.order.Uint32(r.buf[4:8])
	capLen, orig := r.order.Uint32(r.buf[8:12]), r.order.Uint32(r.buf[12:16])
	switch {
	case capLen > orig:
		return nil, time.Time{}, 0, fmt.Errorf("pcap record: captured length %d exceeds the original length %d", capLen, orig)
	case capLen > MaxSnaplen:
		return nil, time.Time{}, 0, fmt.Errorf("pcap record: captured length %d exceeds %d", capLen, MaxSnaplen)
	}
	data = make([]byte, capLen)
	if _, err = io.ReadFull(r.r, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, time.Time{}, 0, fmt.Errorf("pcap record: %w", err)
	}
	ts = time.Unix(int64(sec), int64(frac)*r.nsFactor).UTC()
	return data, ts, int(orig), nil
}
