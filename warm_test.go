package bindery
import (
 "testing"
 _ "modernc.org/sqlite"
 _ "github.com/coder/websocket"
 _ "github.com/fsnotify/fsnotify"
 _ "golang.org/x/sync/errgroup"
)
func TestX(t *testing.T){}
