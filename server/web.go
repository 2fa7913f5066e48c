package server

// web registers the web UI's routes.
func (s *Server) web() {}
