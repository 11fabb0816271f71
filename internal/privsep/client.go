package privsep

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
)

// Client is the server's end of the channel.
type Client struct {
	conn   io.ReadWriter
	logger *slog.Logger
	wmu    sync.Mutex

	mu      sync.Mutex
	next    uint32
	pending map[uint32]chan answer
	err     error // why the channel ended, once done is closed
	done    chan struct{}
}

type answer struct {
	header
	payload []byte
}

// NewClient starts reading the monitor's answers from conn.
func NewClient(conn io.ReadWriter, logger *slog.Logger) *Client {
	c := &Client{conn: conn, logger: logger, pending: map[uint32]chan answer{}, done: make(chan struct{})}
	go c.read()
	return c
}

// Done is closed when the monitor has closed the channel or it failed;
// Err then says which.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil for a channel the monitor closed (it is stopping), else the
// failure that ended it.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// read delivers each answer to the request that waits for it, until the
// channel ends.
func (c *Client) read() {
	r := bufio.NewReader(c.conn)
	hb := make([]byte, headerSize)
	var err error
	for {
		if _, err = io.ReadFull(r, hb); err != nil {
			break
		}
		var h header
		if h, err = parseHeader(hb); err != nil {
			break
		}
		payload := make([]byte, h.length)
		if _, err = io.ReadFull(r, payload); err != nil {
			break
		}
		c.mu.Lock()
		ch, sent := c.pending[h.id], h.id <= c.next
		delete(c.pending, h.id)
		c.mu.Unlock()
		switch {
		case ch == nil && sent:
			// The scrape that asked ended before the answer came.
			c.logger.Debug("the monitor answered a request no scrape waits for any more", "id", h.id)
			continue
		case ch == nil:
			c.logger.Warn("the monitor answered a request this process did not send", "id", h.id, "status", h.status, "payload", string(h.brief(payload)))
			continue
		}
		ch <- answer{header: h, payload: payload}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	c.mu.Lock()
	c.err = err
	c.pending = nil
	c.mu.Unlock()
	close(c.done)
}

// Expose asks the monitor for one exposition in format, bounded by
// timeout, and waits for the answer until ctx ends. Like ExposeFunc, an
// error may come with a body: what the gather got before it failed.
func (c *Client) Expose(ctx context.Context, timeout time.Duration, format expfmt.Format) ([]byte, error) {
	f, esc, ok := formatCode(format)
	if !ok {
		return nil, fmt.Errorf("format %q is none of those the monitor encodes", format)
	}
	timeout = min(max(timeout, time.Millisecond), MaxTimeout)
	ch := make(chan answer, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return nil, errors.New("the monitor process is gone")
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()

	c.wmu.Lock()
	_, err := c.conn.Write(request{kind: kindExpose, id: id, timeout: timeout, format: f, escaping: esc}.encode())
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("asking the monitor process: %w", err)
	}
	select {
	case a := <-ch:
		return decode(a)
	case <-c.done:
		return nil, errors.New("the monitor process is gone")
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// decode reads an answer's payload: a refusal's reason, or the gather's
// error text and the exposition.
func decode(a answer) ([]byte, error) {
	if a.status == statusRefused {
		return nil, fmt.Errorf("the monitor process refused the request: %s", a.payload)
	}
	if len(a.payload) < 4 {
		return nil, errors.New("malformed answer: no message length")
	}
	n := binary.LittleEndian.Uint32(a.payload)
	if uint64(n) > uint64(len(a.payload)-4) {
		return nil, fmt.Errorf("malformed answer: a message of %d bytes in %d", n, len(a.payload)-4)
	}
	body := a.payload[4+n:]
	if n > 0 {
		return body, errors.New(string(a.payload[4 : 4+n]))
	}
	return body, nil
}
