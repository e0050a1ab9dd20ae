package apps

import (
	"fmt"
	"math"

	"github.com/mcpswarm/mcpswarm/session"
)

// Player is a media player over a fixed playlist: a scrubber to play, pause
// and seek, a button for the next track, a progress bar and a level chart.
// Keys: "space" toggles playback, "left"/"right" step 5 s.
type Player struct{}

// PlayerModel is Player's state.
type PlayerModel struct {
	Track    int     `json:"track"`
	Position float64 `json:"position"`
	Playing  bool    `json:"playing"`
}

// PlayerNext skips to the next track.
type PlayerNext struct{}

type track struct {
	Title    string
	Duration float64
}

func playlist() []track {
	return []track{{"Overture", 185}, {"Interlude", 94}, {"Finale", 242}}
}

// Init implements session.App.
func (Player) Init() (session.Model, error) { return PlayerModel{}, nil }

// Update implements session.App.
func (Player) Update(m session.Model, msg session.Msg) (session.Model, error) {
	p, err := modelAs[PlayerModel](m)
	if err != nil {
		return nil, err
	}
	if p.Track < 0 || p.Track >= len(playlist()) {
		return nil, fmt.Errorf("track %d is not in the playlist", p.Track)
	}
	dur := playlist()[p.Track].Duration
	switch msg := msg.(type) {
	case session.Seek:
		p.Position = msg.Position
	case session.Play:
		p.Playing = true
	case session.Pause:
		p.Playing = false
	case PlayerNext:
		p.Track, p.Position = (p.Track+1)%len(playlist()), 0
	case session.KeyPress:
		switch msg.Key.Key {
		case "space":
			p.Playing = !p.Playing
		case "left":
			p.Position = math.Max(p.Position-5, 0)
		case "right":
			p.Position = math.Min(p.Position+5, dur)
		}
	default:
		return nil, fmt.Errorf("player does not handle %T", msg)
	}
	return p, nil
}

// levels is a deterministic 32-point loudness envelope of track t.
func levels(t int) []float64 {
	pts := make([]float64, 32)
	for i := range pts {
		x := float64(i) / 31
		pts[i] = math.Round((0.5+0.4*math.Sin(x*math.Pi*float64(t+2))*math.Sin(x*math.Pi))*100) / 100
	}
	return pts
}

// View implements session.App.
func (Player) View(m session.Model) session.Node {
	p, _ := modelAs[PlayerModel](m)
	tr := playlist()[min(max(p.Track, 0), len(playlist())-1)]
	state := "paused"
	if p.Playing {
		state = "playing"
	}
	return session.Column{Items: []session.Node{
		session.StatusBar{ID: "now", Items: []string{fmt.Sprintf("Track %d/%d: %s", p.Track+1, len(playlist()), tr.Title), state}},
		session.Scrubber{ID: "scrubber", Position: p.Position, Duration: tr.Duration, Playing: p.Playing},
		session.Progress{ID: "elapsed", Label: "Elapsed", Value: p.Position, Max: tr.Duration},
		session.Row{Items: []session.Node{
			session.Button{ID: "next", Label: "Next track", OnClick: PlayerNext{}},
		}},
		session.Chart{ID: "levels", Title: "Levels: " + tr.Title, Series: []session.Series{{Name: "level", Points: levels(p.Track)}}},
	}}
}

// Resources implements session.ResourceProvider.
func (Player) Resources() []session.Projection {
	return []session.Projection{{Key: "playback", Description: "The track, position and state.", Project: func(m session.Model) any {
		p, _ := modelAs[PlayerModel](m)
		tr := playlist()[min(max(p.Track, 0), len(playlist())-1)]
		return map[string]any{"track": tr.Title, "position": p.Position, "duration": tr.Duration, "playing": p.Playing}
	}}}
}
