package privsep

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/prometheus/common/expfmt"
)

// ExposeFunc gathers every collector once, within ctx, and encodes the
// families in format. An error is the gather's: body then holds what was
// gathered, which may be nothing.
type ExposeFunc func(ctx context.Context, format expfmt.Format) (body []byte, err error)

// Monitor answers the server's requests.
type Monitor struct {
	Expose ExposeFunc
	// Limit is the number of expositions that may run at once; a request
	// beyond it is refused. Zero: no limit.
	Limit  int
	Logger *slog.Logger
}

// Serve answers the requests read from conn until the server closes it;
// it returns nil then, or the error that ended the reading. A request it
// cannot honour is refused, logged at WARN, and changes nothing: the
// server it comes from speaks this package's protocol, so a refusal means
// that process misbehaves.
func (m *Monitor) Serve(conn io.ReadWriter) error {
	var (
		wmu     sync.Mutex
		running sync.WaitGroup
		slots   chan struct{}
	)
	defer running.Wait()
	if m.Limit > 0 {
		slots = make(chan struct{}, m.Limit)
	}
	answer := func(h header, payload []byte) error {
		h.length = uint32(len(payload))
		frame := make([]byte, headerSize, headerSize+len(payload))
		h.encode(frame)
		wmu.Lock()
		defer wmu.Unlock()
		_, err := conn.Write(append(frame, payload...))
		return err
	}
	refuse := func(id uint32, reason error) error {
		m.Logger.Warn("refused a request from the HTTP server process", "id", id, "err", reason)
		return answer(header{id: id, status: statusRefused}, []byte(reason.Error()))
	}

	buf := make([]byte, requestSize)
	for {
		if _, err := io.ReadFull(conn, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		req, err := parseRequest(buf)
		if err != nil {
			if err := refuse(req.id, err); err != nil {
				return err
			}
			continue
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			default:
				if err := refuse(req.id, fmt.Errorf("%d expositions already running", m.Limit)); err != nil {
					return err
				}
				continue
			}
		}
		running.Add(1)
		go func() {
			defer running.Done()
			if slots != nil {
				defer func() { <-slots }()
			}
			if err := answer(header{id: req.id, status: statusExposed}, m.expose(req)); err != nil {
				m.Logger.Error("answering the HTTP server process", "id", req.id, "err", err)
			}
		}()
	}
}

// expose runs one exposition and makes the answer's payload: the gather's
// error text, preceded by its length, then the exposition.
func (m *Monitor) expose(req request) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), req.timeout)
	defer cancel()
	body, err := m.Expose(ctx, req.exposition())
	var msg string
	if err != nil {
		msg = err.Error()
	}
	payload := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(msg)+len(body)), uint32(len(msg)))
	return append(append(payload, msg...), body...)
}
